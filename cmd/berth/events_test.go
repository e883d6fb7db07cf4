package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/berthd/berth/supervisor"
)

// changeStream is one GET /v1/events on a connection of its own, read
// line by line on a goroutine of its own.
type changeStream struct {
	t      *testing.T
	cancel context.CancelFunc
	lines  chan supervisor.Change
	ended  chan error // the read's end: nil at EOF
}

func (d *testDaemon) openEvents(t *testing.T) *changeStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	// Its own transport, not kept alive: when the stream ends its
	// connection is closed, and the daemon's figures can be compared.
	tr := &http.Transport{DisableKeepAlives: true, DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var dialer net.Dialer
		return dialer.DialContext(ctx, "unix", d.socket)
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://berth/v1/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		cancel()
		t.Fatalf("GET /v1/events: %s", resp.Status)
	}
	s := &changeStream{t: t, cancel: cancel, lines: make(chan supervisor.Change, 64), ended: make(chan error, 1)}
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			var c supervisor.Change
			if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
				s.ended <- err
				return
			}
			s.lines <- c
		}
		s.ended <- sc.Err()
	}()
	t.Cleanup(cancel)
	return s
}

// next is the next change, within waitLong.
func (s *changeStream) next() supervisor.Change {
	s.t.Helper()
	select {
	case c := <-s.lines:
		return c
	case err := <-s.ended:
		s.t.Fatalf("the events stream ended (%v) while a change was awaited", err)
	case <-time.After(waitLong):
		s.t.Fatalf("no change within %v", waitLong)
	}
	return supervisor.Change{}
}

// TestEventsStream: GET /v1/events sends a change at once, one after a job
// changes state, ends when the daemon stops, and a caller that hangs up
// leaves nothing behind in the daemon.
func TestEventsStream(t *testing.T) {
	t.Parallel()
	d := newTestDaemon(t, map[string]string{"svc.lua": service("svc", "")})
	d.start(daemonOptions{args: []string{"--cpus", "2"}})
	d.waitState("svc", "running")
	before := d.runtime()

	// A caller that hangs up: its connection and its request end.
	gone := d.openEvents(t)
	if c := gone.next(); c.Kind != supervisor.ChangeStatus || c.Seq == 0 {
		t.Errorf("first change %+v, want a status change with a sequence number", c)
	}
	gone.cancel()
	d.waitSettled(before, "after a reader of /v1/events hung up")

	s := d.openEvents(t)
	first := s.next()
	resp := d.post("/v1/jobs/svc/stop")
	resp.Body.Close()
	// The state is looked at only when a change comes: "stopped" is
	// seen only if a change followed it.
	last := first
	for {
		c := s.next()
		if c.Seq <= last.Seq {
			t.Fatalf("change %+v after %+v: the sequence must grow", c, last)
		}
		last = c
		if j, _ := d.job("svc"); j.State == "stopped" {
			break
		}
	}

	d.stop()
	var stopping bool
	for {
		select {
		case c := <-s.lines:
			stopping = stopping || c.Kind == supervisor.ChangeStopping
			continue
		case err := <-s.ended:
			if err != nil {
				t.Errorf("the stream ended with %v, want its end (EOF) at the daemon's stop", err)
			}
			// Every line was handed over before the end: select may
			// have picked the end while some still waited.
			for len(s.lines) > 0 {
				stopping = stopping || (<-s.lines).Kind == supervisor.ChangeStopping
			}
		case <-time.After(waitLong):
			t.Fatalf("the events stream outlived the daemon by %v", waitLong)
		}
		break
	}
	if !stopping {
		t.Errorf("the stream ended without a %q change", supervisor.ChangeStopping)
	}
}
