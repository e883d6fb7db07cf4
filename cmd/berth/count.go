package main

import "github.com/berthd/berth/supervisor"

// The one way this command writes a number with its noun is the daemon's:
// see supervisor.Count and supervisor.Plural.
var (
	count  = supervisor.Count
	plural = supervisor.Plural
)
