package runner

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
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
	conn, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: socketPath, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("journal stream %s: %w", identifier, err)
	}
	defer conn.Close()
	// journald never writes back; shutting the read side says so, as
	// sd_journal_stream_fd does.
	if err := conn.CloseRead(); err != nil {
		return nil, fmt.Errorf("journal stream %s: shutdown read: %w", identifier, err)
	}
	// Best effort: above net.core.wmem_max the kernel clamps it, and a
	// smaller buffer only means the job blocks sooner.
	_ = conn.SetWriteBuffer(journalSendBuffer)

	// identifier, unit id (empty, as sd_journal_stream_fd sends it),
	// priority, level prefix on so that the job's "<N>" prefixes count,
	// then forwarding to syslog, kmsg and console off.
	header := identifier + "\n\n" + strconv.Itoa(priority) + "\n1\n0\n0\n0\n"
	if _, err := conn.Write([]byte(header)); err != nil {
		return nil, fmt.Errorf("journal stream %s: write header: %w", identifier, err)
	}
	f, err := conn.File()
	if err != nil {
		return nil, fmt.Errorf("journal stream %s: %w", identifier, err)
	}
	return f, nil
}

// JournalAvailable reports whether socketPath exists and is a socket. It
// says nothing about whether journald will accept: JournalStream does.
func JournalAvailable(socketPath string) bool {
	fi, err := os.Stat(socketPath)
	return err == nil && fi.Mode().Type() == os.ModeSocket
}
