// Package probes tells berth what this machine offers jobs: how many cores and
// which ones, which GPU cards, how much memory, and the host's name.
//
// Every probe reads files below a root directory ("/" in production), so the
// tests run the very same code against small fixture trees in testdata rather
// than against whatever machine they happen to run on. Each probe is a pure
// parser over an io.Reader plus a function that takes the root and opens the
// files. The parsers are fuzzed: what they read is written by the kernel, a
// container runtime or whoever set CUDA_VISIBLE_DEVICES, not by berth.
//
// A probe that cannot read something degrades to "unknown" or "none" rather
// than failing, because a daemon that refuses to start over an unreadable
// cgroup file helps nobody; only a machine whose core count cannot be found at
// all is an error.
//
// probes only looks. It must never write anything, not even below the root it
// is given; never exit or panic, since what a failure means is the daemon's
// decision; and never import another berth package, since the supervisor
// composes probes with the books and not the other way round.
package probes
