// Package watch tells the daemon which job files changed in the jobs
// directory, and when to look.
//
// It has two parts that the daemon composes:
//
//   - A Watcher turns inotify events on the jobs directory and its parent
//     into a coalesced "something changed" signal (Changes). It does not
//     scan: any event at all means "look again", because editors and
//     Kubernetes save in ways whose events do not name the job file
//     (a ConfigMap update only swaps a "..data" symlink).
//   - A Scanner remembers what the directory held last time and reports the
//     differences: files new or with new content, files gone, and files it
//     refuses to read (wrong owner or mode, too big, not a regular file).
//     It stats everything and reads only what the stat says may have
//     changed.
//
// ReadJobFile reads one file named outright (berth check FILE) by the
// Scanner's rules, so that the client and the daemon never disagree about
// what may be read.
//
// The daemon creates the Watcher first, then scans once, then runs the
// Watcher and scans again after every receive on Changes; so no edit made
// between the first scan and the watch is lost.
//
// What this package must never do:
//   - evaluate Lua or look inside a file: content is bytes to hash and hand
//     over;
//   - decide policy: whether a removed or refused file stops its jobs, and
//     what a missing directory means, is the daemon's choice. The scanner
//     reports facts (Changed, Removed, Refused, DirMissing); the watcher
//     only says when to look;
//   - exit, print, or hold the daemon's loop: the watcher's sends never
//     block, and a scan does nothing but stat and read the directory.
//
// The ownership rule (StrictModes, as sshd and cron apply it) lives in
// strict.go, the walk that applies it to every directory from / down to
// what is read in walk.go, and its sentences in errors.go.
package watch
