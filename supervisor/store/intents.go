package store

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"go.etcd.io/bbolt"
	"golang.org/x/sys/unix"
)

// The intents: a run's process starts while its record commits
// (Later.BeginRun), and a short one may end before it has. A daemon
// killed then would leave no trace of a run that ran to its end, and the
// next would run a batch job again that had run once. So a run's begin
// (Intend, before its process starts) and its end (IntendEnd, as soon as
// it is known, or Later.EndRun) are also
// appended to a file beside the state as they are queued, unsynced: the
// kernel keeps what a killed process wrote, and the next Open puts into
// the state what the state lacks of them. A power loss may take them, with
// the processes they speak of. The file is emptied whenever the writer has
// committed everything appended to it.
const intentsName = "runs.intents"

// intents is the file of intents and its counts; Store.mu guards them.
type intents struct {
	f *os.File // nil where it could not be opened: nothing is appended
	// appended counts the entries appended, announced those of runs
	// about to be queued (Intend) whose write is not queued yet, taken
	// what was appended when the writer last took from the queue, and
	// emptied what was appended when the file was last emptied.
	appended, taken, emptied uint64
	announced                int
	// size is what the file holds: past maxIntentsBytes (a writer that
	// never caught up with the queue) nothing more is appended until it is
	// emptied.
	size int64
}

// maxIntentsBytes bounds the file of intents: a few hundred bytes a run,
// emptied whenever the writer catches up.
const maxIntentsBytes = 64 << 20

// intent is one line of the file: a run's begin or its end.
type intent struct {
	Begin *RunRecord `json:"begin,omitempty"`
	End   *intentEnd `json:"end,omitempty"`
}

type intentEnd struct {
	ID       uint64    `json:"id"`
	End      time.Time `json:"time"`
	ExitCode int       `json:"code"`
	Signal   string    `json:"signal,omitempty"`
	Reason   Reason    `json:"reason"`
	Cause    string    `json:"cause,omitempty"`
}

// intentsPath is the file of intents of the state at path.
func intentsPath(path string) string { return filepath.Join(filepath.Dir(path), intentsName) }

// Intend notes that run r, whose id came from NextRunID, is about to
// start: its Later.BeginRun follows once its process has. Until then the
// file of intents is not emptied.
func (s *Store) Intend(r RunRecord) {
	line, err := json.Marshal(intent{Begin: &r})
	s.mu.Lock()
	defer s.mu.Unlock()
	s.intents.announced++
	if err == nil {
		s.appendIntent(append(line, '\n'))
	}
}

// IntendEnd notes how run id ended, before its end is queued with
// Later.EndIntended (which follows once the run's own record has
// committed). Until then the file of intents is not emptied.
func (s *Store) IntendEnd(id uint64, end time.Time, exitCode int, signal string, reason Reason, cause string) {
	line := endIntent(id, end, exitCode, signal, reason, cause)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.intents.announced++
	if line != nil {
		s.appendIntent(line)
	}
}

// IntentsProblem is why the file of intents could not be opened at Open,
// nil where it was: runs then go unnoted until their records commit.
func (s *Store) IntentsProblem() error { return s.intentsErr }

// NameTaken says what holds the name the state directory is also locked
// by, where a process that is no daemon of this user's does (nil where the
// name is the store's): the directory is then locked by its file alone.
func (s *Store) NameTaken() *NameTaken { return s.lock.squatter }

// Created reports whether Open found no state file and began a new one.
func (s *Store) Created() bool { return s.created }

// IntentsUnread is how many lines of the file of intents Open could not
// read (but a last one cut short as a daemon was killed): the runs they
// noted may be missing from the history.
func (s *Store) IntentsUnread() int { return s.intentsUnread }

// unannounce takes back an Intend whose begin will not be queued.
func (s *Store) unannounce() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.intents.announced = max(0, s.intents.announced-1)
}

// appendIntent appends a line to the file of intents; mu is held.
func (s *Store) appendIntent(line []byte) {
	in := &s.intents
	if in.f == nil || in.size+int64(len(line)) > maxIntentsBytes {
		return
	}
	n, err := in.f.Write(line)
	in.size += int64(n)
	if err != nil {
		return // the record itself is still queued
	}
	in.appended++
}

// endIntent is the line of a run's end.
func endIntent(id uint64, end time.Time, exitCode int, signal string, reason Reason, cause string) []byte {
	line, err := json.Marshal(intent{End: &intentEnd{ID: id, End: end, ExitCode: exitCode, Signal: signal, Reason: reason, Cause: cause}})
	if err != nil {
		return nil
	}
	return append(line, '\n')
}

// emptyIntents empties the file of intents once everything appended to it
// is committed: nothing is queued or kept to try again, nothing was
// appended since the writer last took from the queue, and no run announced
// is still to be queued. The writer calls it after a commit.
func (s *Store) emptyIntents() {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := &s.intents
	if in.f == nil || in.emptied == in.appended || len(s.queue) > 0 || len(s.pending) > 0 ||
		in.taken != in.appended || in.announced > 0 {
		return
	}
	if in.f.Truncate(0) == nil {
		in.emptied, in.size = in.appended, 0
	}
}

// errIntentsFile: the file of intents could not be opened for appending.
var errIntentsFile = errors.New("cannot open the file of intents")

// openIntents puts into the state what the file of intents beside it
// holds and the state lacks (runs begun and never recorded, ends never
// recorded), then opens the file, emptied, for this daemon's intents.
func openIntents(db *bbolt.DB, path string, keep int, below uint64) (*os.File, int, error) {
	ip := intentsPath(path)
	unread, err := replayIntents(db, ip, keep, below)
	if err != nil {
		return nil, 0, err
	}
	// Not through a symbolic link, as the lock file is not.
	f, err := os.OpenFile(ip, os.O_WRONLY|os.O_CREATE|os.O_APPEND|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, unread, fmt.Errorf("%w: %w", errIntentsFile, err)
	}
	if err := f.Truncate(0); err != nil {
		f.Close()
		return nil, unread, fmt.Errorf("%w: %w", errIntentsFile, err)
	}
	return f, unread, nil
}

// endsWithNewline says whether f's last byte is a newline: each intent is
// appended whole with its own, and a last line without one was being
// written as the daemon was killed.
func endsWithNewline(f *os.File) bool {
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 {
		return false
	}
	var last [1]byte
	_, err = f.ReadAt(last[:], fi.Size()-1)
	return err == nil && last[0] == '\n'
}

// replayIntents commits what the file of intents at ip holds that the
// state lacks, and says how many lines it could not read. A line cut
// short, the last one written as the daemon was killed, is passed over
// and not counted, as is anything the state has already (or has trimmed
// from its history).
func replayIntents(db *bbolt.DB, ip string, keep int, below uint64) (unread int, err error) {
	f, err := os.OpenFile(ip, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("%w: %w", errIntentsFile, err)
	}
	defer f.Close()
	var begins []RunRecord
	var ends []intentEnd
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	lastBad := false
	for sc.Scan() {
		var in intent
		if lastBad = json.Unmarshal(sc.Bytes(), &in) != nil; lastBad {
			unread++
			continue
		}
		switch {
		case in.Begin != nil:
			begins = append(begins, *in.Begin)
		case in.End != nil:
			ends = append(ends, *in.End)
		}
	}
	if sc.Err() != nil {
		unread++ // a line past the bound, and what follows it
	} else if lastBad && !endsWithNewline(f) {
		unread-- // cut short as the daemon was killed: no line lost
	}
	if len(begins) == 0 && len(ends) == 0 {
		return unread, nil
	}
	return unread, db.Update(func(tx *bbolt.Tx) error {
		b, err := bucketsOf(tx)
		if err != nil {
			return err
		}
		for _, r := range begins {
			if b.unrecorded(r, keep, below) {
				if err := b.addRun(r, keep); err != nil {
					return fmt.Errorf("replay the begin of run %d: %w", r.ID, err)
				}
			}
		}
		for _, e := range ends {
			r, found, err := b.getRun(e.ID)
			if err != nil {
				return err
			}
			if !found || !r.End.IsZero() || e.Reason == 0 || e.End.IsZero() {
				continue
			}
			r.End, r.ExitCode, r.Signal, r.Reason, r.Cause = e.End, e.ExitCode, e.Signal, e.Reason, e.Cause
			if err := b.putRun(r); err != nil {
				return fmt.Errorf("replay the end of run %d: %w", e.ID, err)
			}
		}
		return nil
	})
}
