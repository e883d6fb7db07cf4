// Package supervisor is the daemon: it composes the books (accounting), the
// machine's inventory (probes) and the loaded declarations (luaapi) into
// running jobs, and keeps their state.
//
// It never exits the process and never prints: it logs through the logger
// it is given and returns errors; cmd/berth decides what a person sees.
package supervisor
