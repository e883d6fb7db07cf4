//go:build !race

package main

// raceEnabled: this test binary was built with the race detector.
const raceEnabled = false
