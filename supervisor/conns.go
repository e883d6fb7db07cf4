package supervisor

import (
	"net/http"

	"github.com/berthd/berth/supervisor/ctlsock"
)

// controlListener is the control socket with its caps on connections (see
// package ctlsock): Config.ControlLimits, or, where it is zero, caps chosen
// from the process's limit on open files, so that a client that leaks
// connections cannot take the descriptors the daemon needs to read the jobs
// directory, write its state and start jobs.
func (d *Daemon) controlListener() *ctlsock.Listener {
	lim := d.cfg.ControlLimits
	if lim == (ctlsock.Limits{}) {
		var err error
		if lim, err = ctlsock.Current(); err != nil {
			// Not a reason to serve nothing: the caps of the lowest
			// limit a Linux process starts with are safe under any.
			lim = ctlsock.LimitsFor(fallbackNoFile)
			d.log.Warn("cannot read the limit on open files; capping control connections as for the lowest", "nofile", fallbackNoFile, "error", err)
		}
	}
	return ctlsock.Wrap(d.cfg.Listener, ctlsock.Options{
		Limits: lim,
		Logger: d.log.Named("control"),
		Refuse: http.HandlerFunc(refuseConnection),
	})
}

// fallbackNoFile is the soft RLIMIT_NOFILE Linux gives a process by default
// (INR_OPEN_CUR), the lowest the daemon may meet.
const fallbackNoFile = 1024

// refuseConnection answers the request of a connection over the caps: 429
// when its user holds its share, 503 when all users together hold the
// daemon's. The connection is closed after it.
func refuseConnection(w http.ResponseWriter, r *http.Request) {
	ref, _ := ctlsock.RefusalOf(r.Context())
	status := http.StatusTooManyRequests
	if ref.Total {
		status = http.StatusServiceUnavailable
	}
	writeError(w, status, CodeTooManyConnections, msgTooManyConnections(ref))
}
