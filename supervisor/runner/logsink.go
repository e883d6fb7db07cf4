package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// copyBufferSize is the most memory a LogSink holds for output, whatever
// the job writes: bytes go from the pipe to the file as they come, never
// gathered into lines. The buffer is borrowed only while there is
// something to copy, so a thousand quiet jobs hold none.
const copyBufferSize = 32 << 10

type copyBuffer = [copyBufferSize]byte

// spareBuffers keeps a few buffers between bursts of output. Not a
// sync.Pool: that one is emptied by every GC (and, under the race
// detector, drops puts at random), so a steady flood would allocate a
// buffer per burst.
var spareBuffers = make(chan *copyBuffer, 16)

func borrowBuffer() *copyBuffer {
	select {
	case b := <-spareBuffers:
		return b
	default:
		return new(copyBuffer)
	}
}

func returnBuffer(b *copyBuffer) {
	select {
	case spareBuffers <- b:
	default: // enough spares: let the GC have it
	}
}

// LogSink is a job's output when journald is absent: a pipe whose write
// end the job gets as Stdout, and the copier (copier_linux.go), which
// copies what comes out of the read end into DIR/JOB.log. When the file would grow past its cap
// it is renamed to JOB.log.1, replacing the one before, and a new JOB.log
// begins: a job's output on disk never exceeds twice the cap.
//
// At most one LogSink may be open per job and directory: two would rotate
// each other's files.
type LogSink struct {
	w *os.File
	// rfd is the read end, in the shared copier's set; r is the read end
	// where the sink copies on a goroutine of its own instead (no shared
	// copier), and then rfd is not used.
	rfd int
	r   *os.File

	path     string
	maxBytes int64

	// f, size, err and abandoned belong to the copier until done is
	// closed; they are read only after that.
	f    *os.File
	size int64
	err  error // the first error; later ones are alike and dropped
	// abandoned: CloseContext gave up on the output, and the read end was
	// closed under its writers.
	abandoned bool
	done      chan struct{}

	closeW   sync.Once
	closeErr error // from closing w, set inside closeW

	// slowDisk, given by tests, runs before each chunk is written: a disk
	// slower than the job's output.
	slowDisk func()
	// header is written before the first output, then dropped (the
	// copier's).
	header []byte
	// continued is the header's line for the top of each file a rotation
	// starts while the run writes, so that the run's output is found in
	// it (berth logs --run N) once the first file is gone.
	continued []byte
	// looked is when the copier last looked whether f is still at path
	// (stillThere), at most once every lookEvery.
	looked    time.Time
	lookEvery time.Duration
	// letGo: f was removed from path and closed, its space given back;
	// the next output begins the file again, under the continued header.
	letGo bool
	// watched is the f the shared copier watches for its removal, wd
	// its watch (copier.track).
	watched *os.File
	wd      int32
}

// lookEvery is how often a sink writing looks whether its file is still at
// its path: one removed (to free space) is written to no more, and a new
// one begun, as logrotate's create does.
const lookEvery = time.Second

// OpenLog prepares dir/job.log, capped at maxBytes, and starts the copier.
// The file is opened, or continued, when the job first writes: a job that
// prints nothing costs no file (creating one is the dearest step of a short
// job's start on some filesystems). Pass File to Start as the job's Stdout,
// then call CloseWriter; after the job has ended, Close.
//
// header, when not "", is written before the job's first output (RunHeader):
// a run that prints nothing leaves no trace in the file.
func OpenLog(dir, job string, maxBytes int64, header string) (*LogSink, error) {
	return openLog(dir, job, maxBytes, header, sinkTuning{lookEvery: lookEvery})
}

// RunHeader is the line a run's output starts with in its job's log file,
// so that the runs can be told apart there and one run's output found
// (berth logs --run N): `--- berth: run 42 started 2026-12-04T09:00:00Z ---`.
func RunHeader(run uint64, start time.Time) string {
	return runHeaderPrefix + strconv.FormatUint(run, 10) + " started " + RunStart(start) + " ---\n"
}

const runHeaderPrefix = "--- berth: run "

// ParseRunHeader returns the run of a RunHeader line, whether it is the
// header's continued line at the top of a file a rotation started, and
// whether line is either.
func ParseRunHeader(line []byte) (run uint64, continued, ok bool) {
	run, _, continued, ok = ParseRunHeaderStart(line)
	return run, continued, ok
}

// ParseRunHeaderStart is ParseRunHeader, with the run's start as the
// header gives it: what tells a header berth wrote from a job's line that
// looks like one (a job that prints a log), which names a run of another
// job, or a start its run did not have.
func ParseRunHeaderStart(line []byte) (run uint64, start string, continued, ok bool) {
	rest, found := bytes.CutPrefix(line, []byte(runHeaderPrefix))
	if !found {
		return 0, "", false, false
	}
	digits, tail, found := bytes.Cut(rest, []byte(" started "))
	tail = bytes.TrimRight(tail, "\n")
	if !found || !bytes.HasSuffix(tail, []byte(" ---")) {
		return 0, "", false, false
	}
	run, err := strconv.ParseUint(string(digits), 10, 64)
	continued = bytes.HasSuffix(tail, []byte(continuedSuffix))
	start = string(bytes.TrimSuffix(bytes.TrimSuffix(tail, []byte(continuedSuffix)), []byte(" ---")))
	return run, start, continued, err == nil
}

// RunStart is a run's start as its header gives it.
func RunStart(start time.Time) string { return start.UTC().Format(time.RFC3339) }

// continuedSuffix ends a run's header repeated at the top of a file a
// rotation started while the run wrote.
const continuedSuffix = ", continued ---"

// sinkTuning is what tests change of a sink: a disk slower than the
// job's output, and how often it looks whether its file was removed.
type sinkTuning struct {
	slowDisk  func()
	lookEvery time.Duration
}

func openLog(dir, job string, maxBytes int64, header string, tune sinkTuning) (*LogSink, error) {
	// Job names are checked long before this, but a name that reached
	// here by another path must still not climb out of dir or hide.
	if job == "" || strings.ContainsAny(job, "/\x00") || strings.HasPrefix(job, ".") {
		return nil, fmt.Errorf("open log for job %q: %w", job, ErrBadName)
	}
	if maxBytes <= 0 {
		return nil, fmt.Errorf("open log for job %s: cap of %d bytes is not positive", job, maxBytes)
	}
	s := &LogSink{
		path:      filepath.Join(dir, job+".log"),
		maxBytes:  maxBytes,
		done:      make(chan struct{}),
		slowDisk:  tune.slowDisk,
		lookEvery: tune.lookEvery,
	}
	if header != "" {
		s.header = []byte(header)
		s.continued = []byte(strings.TrimSuffix(header, " ---\n") + continuedSuffix + "\n")
	}
	// What would stop the file being created later is caught now, when it
	// can still fail the start: a missing or unwritable directory.
	if err := syscall.Access(dir, unix.W_OK|unix.X_OK); err != nil {
		if fi, serr := os.Stat(dir); serr == nil && !fi.IsDir() {
			err = syscall.ENOTDIR // not "permission denied": it cannot be entered
		}
		return nil, fmt.Errorf("open log for job %s: %w", job, &os.PathError{Op: "access", Path: dir, Err: err})
	}
	// The write end is the job's, blocking as a program expects its
	// output to be; the read end is the copier's, in Go's poller. (os.Pipe
	// makes both non-blocking, and the job's end would then be switched
	// back at every start.)
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
		return nil, fmt.Errorf("open log for job %s: pipe: %w", job, err)
	}
	if err := unix.SetNonblock(fds[0], true); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return nil, fmt.Errorf("open log for job %s: pipe: %w", job, err)
	}
	s.w = os.NewFile(uintptr(fds[1]), "|1")
	s.rfd = fds[0]
	if c := sharedCopier(); c == nil || !c.add(s) {
		s.r = os.NewFile(uintptr(fds[0]), "|0")
		go s.copy()
	}
	return s, nil
}

// File is the write end of the pipe, to be the job's Spec.Stdout.
func (s *LogSink) File() *os.File { return s.w }

// CloseWriter closes the daemon's copy of the write end. Call it once
// Start has returned (or failed): the copier ends when every write end is
// closed, and the daemon's own copy would keep it waiting for ever.
func (s *LogSink) CloseWriter() error {
	s.closeW.Do(func() { s.closeErr = s.w.Close() })
	return s.closeErr
}

// Close closes the daemon's write end if CloseWriter has not, waits until
// the copier has written everything the job wrote and closed the file,
// and returns the first error met while writing it. Call it after the job
// has been reaped. A descendant that left the job's process group and
// still holds the pipe keeps it waiting; CloseContext bounds the wait.
func (s *LogSink) Close() error {
	return s.CloseContext(context.Background())
}

// CloseContext is Close, except that when ctx ends first the pipe is
// closed under whoever still writes to it (they get EPIPE) and ctx's error
// is returned.
func (s *LogSink) CloseContext(ctx context.Context) error {
	wErr := s.CloseWriter()
	select {
	case <-s.done:
	case <-ctx.Done():
		select {
		case <-s.done: // drained just in time
		default:
			if s.r != nil {
				s.r.Close() // the copier's Read returns os.ErrClosed
				<-s.done
			} else {
				theCopier.abandon(s)
				if <-s.done; !s.abandoned {
					break // it reached the end first
				}
			}
			return fmt.Errorf("close log %s: output still open after the job ended: %w", s.path, ctx.Err())
		}
	}
	if wErr != nil {
		return fmt.Errorf("close log %s: %w", s.path, wErr)
	}
	return s.err
}

// copy is the goroutine of a sink that has no shared copier.
func (s *LogSink) copy() {
	defer close(s.done)
	if rc, err := s.r.SyscallConn(); err == nil {
		s.copyPolled(rc)
	} else {
		s.copyFrom(s.r)
	}
	s.r.Close()
	s.closeFile()
}

// closeFile closes the log file, if the job wrote any.
func (s *LogSink) closeFile() {
	if s.f != nil {
		if err := s.f.Close(); err != nil {
			s.fail(fmt.Errorf("close %s: %w", s.path, err))
		}
		s.f = nil
	}
}

// copyPolled copies until the pipe's end, waiting for output in Go's poller
// with no buffer held, and borrowing one for each chunk. Each call of the
// callback copies one chunk and returns, so that CloseContext's Close, which
// waits for the callback, gets in even while output keeps coming.
func (s *LogSink) copyPolled(rc syscall.RawConn) {
	ended := false
	for !ended {
		err := rc.Read(func(fd uintptr) bool {
			buf := borrowBuffer()
			defer returnBuffer(buf)
			n, err := syscall.Read(int(fd), buf[:])
			switch {
			case err == syscall.EAGAIN:
				return false // nothing yet: wait for more
			case err == syscall.EINTR:
				return true // try again
			case err != nil:
				s.fail(fmt.Errorf("read job output for %s: %w", s.path, err))
				ended = true
			case n == 0:
				ended = true
			default:
				s.write(buf[:n])
			}
			return true
		})
		if err != nil {
			// The read end was closed under the copier (CloseContext).
			if !errors.Is(err, os.ErrClosed) {
				s.fail(fmt.Errorf("read job output for %s: %w", s.path, err))
			}
			return
		}
	}
}

// copyFrom is the plain copy, for a pipe the poller does not take.
func (s *LogSink) copyFrom(r io.Reader) {
	buf := borrowBuffer()
	defer returnBuffer(buf)
	for {
		n, err := r.Read(buf[:])
		if n > 0 {
			s.write(buf[:n])
		}
		if err != nil {
			if err != io.EOF && !errors.Is(err, os.ErrClosed) {
				s.fail(fmt.Errorf("read job output for %s: %w", s.path, err))
			}
			return
		}
	}
}

// write never blocks the job on the disk's behalf: bytes that cannot be
// written are dropped, the error kept for Close, and the next chunk tries
// again, so a full disk loses output but never stops the job.
func (s *LogSink) write(p []byte) {
	if h := s.header; h != nil {
		s.header = nil
		if s.f == nil && !endsLine(s.path) {
			// The run before ended its output mid-line: the header
			// starts a line of its own, or it would not be found.
			h = append([]byte{'\n'}, h...)
		}
		s.write(h)
	}
	if s.slowDisk != nil {
		s.slowDisk()
	}
	// A file the shared copier watches is let go of as it is removed
	// (copier.notified); one it cannot watch is looked at here.
	if s.f != nil && s.watched != s.f && !s.stillThere() {
		s.letGoFile()
	}
	if s.letGo {
		// Its directory made again where that went too.
		s.letGo = false
		_ = os.MkdirAll(filepath.Dir(s.path), 0o750)
		if err := s.open(0); err != nil {
			s.fail(err)
			return
		}
		s.writeContinued()
	}
	for len(p) > 0 {
		if s.f == nil {
			if err := s.open(0); err != nil {
				s.fail(err)
				return
			}
		}
		room := s.maxBytes - s.size
		if room <= 0 {
			if !s.rotate() {
				return
			}
			continue
		}
		n, full := len(p), false
		if int64(n) > room {
			n, full = int(room), true
			// End the file at a line's end where one is in reach, so that
			// a line is not split across the two files.
			if i := bytes.LastIndexByte(p[:n], '\n'); i >= 0 {
				n = i + 1
			}
		}
		w, err := s.f.Write(p[:n])
		s.size += int64(w)
		if err != nil {
			s.fail(fmt.Errorf("write %s: %w", s.path, err))
			return
		}
		p = p[n:]
		if full && !s.rotate() {
			return
		}
	}
}

// endsLine reports whether the file at path is empty, missing, or ends
// with a newline.
func endsLine(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return true
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 {
		return true
	}
	var last [1]byte
	_, err = f.ReadAt(last[:], fi.Size()-1)
	return err != nil || last[0] == '\n'
}

// rotate moves the full file aside and starts an empty one. If the rename
// fails the file is emptied instead: losing old output is better than
// exceeding the cap or stopping the job.
func (s *LogSink) rotate() bool {
	if err := s.f.Close(); err != nil {
		s.fail(fmt.Errorf("close %s: %w", s.path, err))
	}
	s.f = nil
	if err := os.Rename(s.path, s.path+".1"); err != nil {
		s.fail(fmt.Errorf("rotate %s: %w", s.path, err))
	}
	if err := s.open(os.O_TRUNC); err != nil {
		s.fail(err)
		return false
	}
	s.writeContinued()
	return true
}

// writeContinued begins a file the run goes on writing in with the run's
// header, marked continued: a line split goes on below it.
func (s *LogSink) writeContinued() {
	if s.continued != nil && int64(len(s.continued)) < s.maxBytes/2 {
		w, err := s.f.Write(s.continued)
		s.size += int64(w)
		if err != nil {
			s.fail(fmt.Errorf("write %s: %w", s.path, err))
		}
	}
}

// stillThere says whether the open file is the one at path, looking at
// most once every lookEvery (true between looks, and where it cannot
// tell).
func (s *LogSink) stillThere() bool {
	now := time.Now()
	if now.Sub(s.looked) < s.lookEvery {
		return true
	}
	s.looked = now
	var open, named unix.Stat_t
	if unix.Fstat(int(s.f.Fd()), &open) != nil {
		return true
	}
	if err := unix.Stat(s.path, &named); err != nil {
		return !errors.Is(err, unix.ENOENT)
	}
	return open.Dev == named.Dev && open.Ino == named.Ino
}

// letGoFile closes a file no longer at path, so that its space comes
// back; the run's next output goes on at path, in a new file under the
// run's header, or in one someone put there.
func (s *LogSink) letGoFile() {
	s.closeFile()
	s.letGo = true
}

// open opens the log for appending. O_NOFOLLOW: the state directory is
// the daemon's, and a symlink planted there must not redirect a job's
// output onto another file.
func (s *LogSink) open(flag int) error {
	f, err := os.OpenFile(s.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND|syscall.O_NOFOLLOW|flag, 0o640)
	if err != nil {
		return err // *PathError: names the file already
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("stat %s: %w", s.path, err)
	}
	s.f, s.size = f, fi.Size()
	return nil
}

func (s *LogSink) fail(err error) {
	if s.err == nil {
		s.err = err
	}
}
