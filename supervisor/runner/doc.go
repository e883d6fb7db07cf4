// Package runner spawns one job's process and ends it: it starts the
// process in its own process group with exactly the environment, directory,
// credentials and output it is given, reports how it ended, stops the whole
// group on request, and provides the two places its output can go — a
// journald stream of its own, or a size-capped file per job.
//
// It is mechanism only. It never decides policy: whether to restart, how
// long a run may last, which signal stops a job and how long to wait for it
// are the caller's, passed in on every call. It never logs, never reads the
// daemon's own environment on a job's behalf (a Spec's Env is the whole
// environment, PATH included), and never leaves a process it started
// unreaped.
//
// Two effects reach beyond the process being started, and both are
// deliberate. Start marks every descriptor of the daemon above 2
// close-on-exec, so that a descriptor the daemon inherited (from a shell, or
// from a library that opened it without O_CLOEXEC) cannot leak into a job.
// And when a group leader ends, whatever is left in its process group is
// SIGKILLed, so a run that ends leaves nothing behind in its group.
//
// A process group is not a containment boundary: a descendant that calls
// setsid or setpgid leaves the group and escapes both Stop and the clean-up
// after the leader ends. Only a cgroup holds such a process; under systemd
// the unit's cgroup is the last line.
package runner
