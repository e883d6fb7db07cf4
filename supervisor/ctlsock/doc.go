// Package ctlsock guards the daemon's control socket against its own
// clients. It caps the connections one user (the peer's uid, as the kernel
// reports it) and all users together may hold, at numbers chosen from the
// process's limit on open files, so that a client that leaks connections
// cannot take the descriptors the daemon needs to read the jobs directory,
// write its state and start jobs; and it answers a connection over a cap at
// once, with an HTTP error the caller writes, instead of leaving it unserved.
//
// It is a net.Listener and knows nothing of what is served over it. It never
// raises the limit on open files (the Go runtime does that at start; see
// Current), and it closes a connection it admitted only when that
// connection has been idle a while and its user asks for more than its share.
package ctlsock
