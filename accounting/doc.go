// Package accounting keeps the books of what a machine has and who holds it,
// and decides who waits.
//
// A Book is one machine's ledger: it grants cores, cards and memory or says no,
// and takes them back, and never blocks. The Placer holds one Book per machine
// and is the only place where a request waits; it orders the waiters, keeps the
// head of the queue from being starved, and lets short jobs backfill. Env turns
// a grant into the environment variables a job's libraries read at import.
//
// The package does no I/O and never reads the clock: the time is always passed
// in (the Placer takes a Clock), so every decision can be replayed in a test.
// It imports nothing else of berth's.
package accounting
