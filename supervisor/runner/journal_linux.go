package runner

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// JournalSocket is where journald accepts stream connections, the ones
// that carry a service's stdout and stderr.
const JournalSocket = "/run/systemd/journal/stdout"

// journalSendBuffer is what sd_journal_stream_fd asks for: a job that
// writes in bursts fills a small buffer and blocks while journald is busy.
const journalSendBuffer = 8 << 20

// JournalStream connects to journald's stream socket the way
// sd_journal_stream_fd(3) does and returns the connection, ready to be a
// job's Stdout: every line the job writes becomes an entry with
// SYSLOG_IDENTIFIER=identifier and the job's own _PID, at priority unless
// the line starts with a "<N>" prefix of its own. The daemon is not in the
// data path. Close the returned file once Start has returned.
func JournalStream(socketPath, identifier string, priority int) (*os.File, error) {
	if strings.ContainsAny(identifier, "\n\x00") {
		return nil, fmt.Errorf("journal stream: identifier %q: %w", identifier, ErrBadName)
	}
	if priority < 0 || priority > 7 {
		return nil, fmt.Errorf("journal stream %s: priority %d is not between 0 and 7", identifier, priority)
	}
	// A descriptor of its own, not a net.UnixConn: Go's poller would add
	// it, its addresses would be read, and File would duplicate it only
	// for the original to be closed, 14 system calls where 8 give the
	// child what it needs (BenchmarkJournalStream).
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("journal stream %s: socket: %w", identifier, err)
	}
	if err := journalHandshake(fd, socketPath, identifier, priority); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("journal stream %s: %w", identifier, err)
	}
	// Blocking by now, so not in Go's poller.
	return os.NewFile(uintptr(fd), "journal:"+identifier), nil
}

// journalHandshake connects fd, a new non-blocking socket, to journald and
// sends the stream's header, leaving fd blocking, as a child expects its
// output to be. The connect is made without blocking, so that journald
// with its backlog full is an error (EAGAIN), and the job's output goes to
// a file, rather than a wait for it.
func journalHandshake(fd int, socketPath, identifier string, priority int) error {
	if err := unix.Connect(fd, &unix.SockaddrUnix{Name: socketPath}); err != nil {
		return &os.PathError{Op: "connect", Path: socketPath, Err: err}
	}
	if err := unix.SetNonblock(fd, false); err != nil {
		return fmt.Errorf("set blocking: %w", err)
	}
	// journald never writes back; shutting the read side says so, as
	// sd_journal_stream_fd does.
	if err := unix.Shutdown(fd, unix.SHUT_RD); err != nil {
		return fmt.Errorf("shutdown read: %w", err)
	}
	// Best effort: above net.core.wmem_max the kernel clamps it, and a
	// smaller buffer only means the job blocks sooner.
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, journalSendBuffer)

	// identifier, unit id (empty, as sd_journal_stream_fd sends it),
	// priority, level prefix on so that the job's "<N>" prefixes count,
	// then forwarding to syslog, kmsg and console off.
	header := identifier + "\n\n" + strconv.Itoa(priority) + "\n1\n0\n0\n0\n"
	for b := []byte(header); len(b) > 0; {
		n, err := unix.Write(fd, b)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("write header: %w", err)
		}
		b = b[n:]
	}
	return nil
}

// JournalAvailable reports whether socketPath exists and is a socket. It
// says nothing about whether journald will accept: JournalStream does.
func JournalAvailable(socketPath string) bool {
	fi, err := os.Stat(socketPath)
	return err == nil && fi.Mode().Type() == os.ModeSocket
}
