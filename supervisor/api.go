package supervisor

import (
	"context"
	"encoding/json"
	"net"
	"net/http"

	"golang.org/x/sys/unix"
)

// APIVersion is the path prefix of the control socket's API. A client that
// finds no such path talks to a daemon too old for it.
const APIVersion = "/v1"

// APIError is the body of every 4xx and 5xx answer.
type APIError struct {
	Error string `json:"error"`
}

func (d *Daemon) api() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+APIVersion+"/status", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, d.Status())
	})
	mux.HandleFunc("POST "+APIVersion+"/reload", func(w http.ResponseWriter, r *http.Request) {
		d.logCaller(r, "reload")
		v, err := d.call(r.Context(), func() any { return d.reload(false) })
		if err != nil {
			writeError(w, http.StatusServiceUnavailable, "the daemon did not answer: "+err.Error())
			return
		}
		writeJSON(w, http.StatusOK, v)
	})
	for _, verb := range []struct {
		name string
		ev   eventKind
	}{{"start", evStart}, {"stop", evStop}, {"restart", evRestart}} {
		mux.HandleFunc("POST "+APIVersion+"/jobs/{name}/"+verb.name, func(w http.ResponseWriter, r *http.Request) {
			name := r.PathValue("name")
			d.logCaller(r, verb.name, "job", name)
			d.mu.Lock()
			j, ok := d.jobs[name]
			d.mu.Unlock()
			if !ok {
				writeError(w, http.StatusNotFound, "no job named \""+name+"\" (berth jobs lists them)")
				return
			}
			j.in.post(jobMessage{ev: &event{kind: verb.ev}})
			writeJSON(w, http.StatusOK, map[string]string{"job": name, "requested": verb.name})
		})
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no such call: "+r.Method+" "+r.URL.Path+" (the daemon speaks "+APIVersion+")")
	})
	return mux
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, APIError{Error: msg})
}

type peerKey struct{}

// withPeer remembers the caller's credentials for each connection, so that
// mutating calls can be logged with who made them.
func withPeer(ctx context.Context, c net.Conn) context.Context {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return ctx
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return ctx
	}
	var cred *unix.Ucred
	_ = raw.Control(func(fd uintptr) {
		cred, err = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	})
	if err != nil || cred == nil {
		return ctx
	}
	return context.WithValue(ctx, peerKey{}, *cred)
}

func (d *Daemon) logCaller(r *http.Request, call string, kv ...any) {
	kv = append([]any{"call", call}, kv...)
	if cred, ok := r.Context().Value(peerKey{}).(unix.Ucred); ok {
		kv = append(kv, "uid", cred.Uid, "pid", cred.Pid)
	}
	d.log.Info("control request", kv...)
}

// Reload asks the loop to reload (SIGHUP does this) and waits for the result.
func (d *Daemon) Reload(ctx context.Context) (ReloadResult, error) {
	v, err := d.call(ctx, func() any { return d.reload(false) })
	if err != nil {
		return ReloadResult{}, err
	}
	return v.(ReloadResult), nil
}
