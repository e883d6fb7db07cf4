// Package store is the daemon's persistent state: each job's last known
// state and the history of its runs, in one bbolt file (state.db), written
// by one goroutine in group commits so that durability costs an fsync pair
// per group rather than per write. A lock file beside it (state.lock) says
// which daemon owns the directory, so that a state file removed under one
// lets no second daemon start there.
//
// It records what the supervisor tells it and answers what it recorded; it
// must never decide anything about jobs, and never keep a record in any
// form but the one pinned by testdata/v1.db and the golden bytes of each
// record version: stored numbers and layouts change only by a new version,
// read beside the old. Only a missing file starts a new state.
package store
