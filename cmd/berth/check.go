package main

import (
	"cmp"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/berthd/berth/accounting"
	"github.com/berthd/berth/luaapi"
	"github.com/berthd/berth/probes"
	"github.com/berthd/berth/supervisor"
)

func runCheck(c *cli, args []string) int {
	fs := c.flags("check")
	var m machineFlags
	m.register(fs)
	asJSON := fs.Bool("json", false, "print the loaded flavors and jobs, resolved, as JSON")
	targets, code, done := c.parse(fs, args)
	if done {
		return code
	}
	if len(targets) == 0 {
		targets = []string{defaultJobsDir(c.env)}
	}
	inv, err := c.inventory(&m)
	if err != nil {
		fmt.Fprintln(c.stderr, msgInventory(err))
		return exitFailed
	}

	opts := luaapi.Options{Machine: luaMachine(inv)}
	var files []*luaapi.File
	var problems []checkProblem
	for _, target := range targets {
		got, err := evalTarget(target, opts)
		if err != nil {
			problems = append(problems, checkProblem{msg: msgCheckTarget(target, err)})
			continue
		}
		files = append(files, got...)
	}
	set := luaapi.Combine(files)
	for _, e := range set.Errors {
		problems = append(problems, checkProblem{pos: e.Pos, msg: e.Error()})
	}
	for _, e := range set.Problems {
		problems = append(problems, checkProblem{pos: e.Pos, msg: e.Error()})
	}
	problems = append(problems, feasibility(set, inv)...)
	// In the order a person fixes them: file by file, top to bottom.
	slices.SortStableFunc(problems, func(a, b checkProblem) int {
		return cmp.Or(strings.Compare(a.pos.File, b.pos.File), cmp.Compare(a.pos.Line, b.pos.Line))
	})

	if *asJSON {
		if code := c.writeJSON(checkReport(set, problems)); code != exitOK {
			return code
		}
	} else {
		for _, p := range problems {
			fmt.Fprintln(c.stdout, p.msg)
		}
		fmt.Fprintln(c.stdout, msgCheckSummary(len(set.Files), len(set.Jobs), len(set.Flavors), len(problems)))
	}
	if len(problems) > 0 {
		return exitFailed
	}
	return exitOK
}

type checkProblem struct {
	pos luaapi.Pos
	msg string
}

// evalTarget evaluates one argument of `berth check`: a directory's job
// files, or one file named outright (whatever its name).
func evalTarget(target string, opts luaapi.Options) ([]*luaapi.File, error) {
	info, err := os.Stat(target)
	if err != nil {
		return nil, err
	}
	if info.IsDir() {
		return luaapi.EvalDir(target, opts)
	}
	src, err := os.ReadFile(target)
	if err != nil {
		return nil, err
	}
	return []*luaapi.File{luaapi.Eval(target, src, opts)}, nil
}

// feasibility reports, for every loaded job, what the daemon would find
// before starting it: that it could ever fit this machine, and that its user
// and group exist.
func feasibility(set *luaapi.Set, inv probes.Inventory) []checkProblem {
	capacity := capacityOf(inv)
	book := accounting.NewBook(capacity, nil)
	var out []checkProblem
	for _, j := range set.Jobs {
		if !j.Resources.Unaccounted() && !book.Fits(j.Resources) {
			err := &accounting.UnplaceableError{Asked: j.Resources, Largest: capacity}
			out = append(out, checkProblem{pos: j.Pos, msg: msgJobUnplaceable(j.Pos, j.Name, err)})
		}
		if j.User != "" || j.Group != "" {
			if _, err := supervisor.LookupCredentials(j.User, j.Group); err != nil {
				out = append(out, checkProblem{pos: j.Pos, msg: msgJobCredentials(j.Pos, j.Name, err)})
			}
		}
	}
	return out
}

// capacityOf is the books' view of the probed machine.
func capacityOf(inv probes.Inventory) accounting.Capacity {
	return accounting.Capacity{
		Name:     "local",
		CPUIDs:   inv.CPUIDs,
		GPUs:     len(inv.GPUs),
		RAMBytes: inv.RAM.Bytes,
		RAMKnown: inv.RAM.Known,
	}
}

func luaMachine(inv probes.Inventory) luaapi.Machine {
	return luaapi.Machine{
		CPUs:     inv.CPUs,
		GPUs:     len(inv.GPUs),
		RAMBytes: inv.RAM.Bytes,
		RAMKnown: inv.RAM.Known,
		Hostname: inv.Hostname,
	}
}

// checkJSON is `berth check --json`; its keys are part of the interface.
type checkJSON struct {
	Files   []string                   `json:"files"`
	Flavors []supervisor.FlavorView    `json:"flavors"`
	Jobs    []supervisor.JobDefinition `json:"jobs"`
	Errors  []messageJSON              `json:"errors"`
}

type messageJSON struct {
	File    string `json:"file,omitempty"`
	Line    int    `json:"line,omitempty"`
	Message string `json:"message"`
}

func checkReport(set *luaapi.Set, problems []checkProblem) checkJSON {
	out := checkJSON{Files: []string{}, Flavors: []supervisor.FlavorView{}, Jobs: []supervisor.JobDefinition{}, Errors: []messageJSON{}}
	for _, f := range set.Files {
		out.Files = append(out.Files, f.Path)
	}
	usedBy := map[string][]string{}
	for i := range set.Jobs {
		j := &set.Jobs[i]
		out.Jobs = append(out.Jobs, supervisor.DefinitionOf(j))
		if j.Flavor != "" {
			usedBy[j.Flavor] = append(usedBy[j.Flavor], j.Name)
		}
	}
	for _, f := range set.Flavors {
		out.Flavors = append(out.Flavors, supervisor.FlavorOf(f, usedBy[f.Name]))
	}
	for _, p := range problems {
		out.Errors = append(out.Errors, messageJSON{File: p.pos.File, Line: p.pos.Line, Message: p.msg})
	}
	return out
}
