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
// Three effects reach beyond the process being started, and all are
// deliberate. Start marks every descriptor of the daemon above 2
// close-on-exec, so that a descriptor the daemon inherited (from a shell, or
// from a library that opened it without O_CLOEXEC) cannot leak into a job.
// When a group leader ends, whatever is left in its process group is
// SIGKILLed, so a run that ends leaves nothing behind in its group. And
// Start sets the daemon's own oom_score_adj, for a moment.
//
// A process begins with its parent's value, copied at the fork and kept through exec,
// and the daemon may run protected from the OOM killer (systemd's
// OOMScoreAdjust=), a protection no job may share. So Start gives the
// daemon the job's value (Spec.OOMScoreAdj, 0 unless set) just before the
// fork and takes its own back once the job has executed: the job, and
// whatever it forks, never has the daemon's value, not even between fork
// and exec. Where the daemon is at the job's value already, as it is
// without such a protection, nothing is written, and such Starts go side
// by side. A Start that must change the value has the daemon to itself
// from reading it until it is back: the others wait for it, and it for
// them. For that moment, the fork and exec, the daemon is at the job's
// value, and so is whatever the daemon forks by other means (os/exec)
// meanwhile; and a change made to the daemon's value from outside during
// it is undone.
//
// Lowering a value, the daemon's to the job's or back to its own, the
// kernel allows a daemon with CAP_SYS_RESOURCE, and any other down to the
// floor set by the last writer that had the capability (systemd, for a
// unit's OOMScoreAdjust=). A daemon that cannot take the job's value starts
// nothing and says why (*OOMScoreAdjError); one that cannot take its own
// back starts the job, runs on at the job's value, and says so
// (Process.DaemonOOMScoreAdjErr). A job inherits the floor with the value:
// where the daemon has the capability its write sets the job's floor to
// the job's value; where it has not, the job may lower its own value,
// unprivileged, down to the daemon's floor.
//
// A process group is not a containment boundary: a descendant that calls
// setsid or setpgid leaves the group and escapes both Stop and the clean-up
// after the leader ends. Only a cgroup holds such a process; under systemd
// the unit's cgroup is the last line.
package runner
