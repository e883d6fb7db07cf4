package main

import "github.com/berthd/berth/accounting"

// The one way berth writes a number with its noun: see accounting.Count
// and accounting.Plural.
var (
	count  = accounting.Count
	plural = accounting.Plural
)
