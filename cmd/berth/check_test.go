package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berthd/berth/supervisor"
)

func TestCheckExamples(t *testing.T) {
	dirs, err := filepath.Glob("../../examples/*")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			// A box big enough for every example: they must all be valid.
			out, errOut, code := berth(t, nil, "check", dir, "--cpus", "24", "--gpus", "4", "--ram", "256G")
			if code != exitOK {
				t.Fatalf("exit %d:\n%s%s", code, out, errOut)
			}
			if !strings.Contains(out, ", 0 errors") {
				t.Errorf("summary: %s", out)
			}
		})
	}
}

func TestCheckReportsEveryMistake(t *testing.T) {
	out, _, code := berth(t, nil, "check", "testdata/check", "--cpus", "4", "--gpus", "2")
	if code != exitFailed {
		t.Errorf("exit %d, want %d", code, exitFailed)
	}
	golden(t, "check", out)
}

func TestCheckJSON(t *testing.T) {
	out, _, code := berth(t, nil, "check", "../../examples/quickstart", "--json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, out)
	}
	var report checkJSON
	if err := json.Unmarshal([]byte(out), &report); err != nil {
		t.Fatal(err)
	}
	if len(report.Files) != 3 || len(report.Flavors) != 2 || len(report.Errors) != 0 {
		t.Fatalf("report: %d files, %d flavors, %d errors", len(report.Files), len(report.Flavors), len(report.Errors))
	}
	var hello *supervisor.JobDefinition
	for i := range report.Jobs {
		if report.Jobs[i].Name == "hello" {
			hello = &report.Jobs[i]
		}
	}
	if hello == nil || hello.Flavor != "small" || hello.Resources.CPUs != 1 || hello.Resources.RAMBytes != 256<<20 || hello.Cmd[0] != "/bin/sh" || hello.StopSignal != "SIGTERM" {
		t.Errorf("hello as loaded: %+v", hello)
	}
}

func TestCheckMissingPath(t *testing.T) {
	out, _, code := berth(t, nil, "check", "testdata/nowhere")
	if code != exitFailed {
		t.Errorf("exit %d", code)
	}
	want := "testdata/nowhere: no such file or directory; name a job file or a directory of them (berth check FILE|DIR...)\n0 files, 0 jobs, 0 flavors, 1 error\n"
	if out != want {
		t.Errorf("got\n%s\nwant\n%s", out, want)
	}
}
