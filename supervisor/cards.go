package supervisor

import (
	"cmp"
	"context"
	"errors"
	"os/user"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/berthd/berth/accounting"
	"github.com/berthd/berth/probes"
	"github.com/berthd/berth/supervisor/runner"
)

// The cards as they are: every cardsEvery the daemon asks the driver (a
// probes.CardReader, NVML) what each of its cards holds. A process on a
// card that berth did not start (its environment lacks this berth's
// BERTH_INSTANCE) is foreign; a card on which a foreign process holds more
// than the foreign limit (Config.ForeignLimit) is off for whole cards, so
// that a job asking for whole cards is not placed where a hand-started
// server already sits, and its why says which card and whose process.
// What a card holds beyond what its shares booked (foreign processes, runs
// over their share) is room no share is given. Each run's processes'
// memory is its use, shown in status and its peak kept in its record. Read
// off the event loop; the books and the status read the last answer.

// cardsEvery is how often the cards are read.
const cardsEvery = 5 * time.Second

// DefaultForeignLimit is how much memory a foreign process may hold on a
// card before the card is off: a process of a desktop or a monitor holds a
// few hundred MiB.
const DefaultForeignLimit = 1 << 30

// ForeignUse is one process on a card that berth did not start.
type ForeignUse struct {
	PID     int    `json:"pid"`
	User    string `json:"user"`
	Command string `json:"command"`
	// MemoryBytes is what it holds on the card; -1 when the driver cannot
	// say.
	MemoryBytes int64 `json:"memory_bytes"`
}

// cardState is one of the daemon's cards as last read.
type cardState struct {
	MemoryTotal int64
	MemoryUsed  int64
	Foreign     []ForeignUse
	// Off: a foreign process holds more than the foreign limit; no job is
	// given the card whole meanwhile.
	Off bool
}

// runCards is what a run's processes hold on the cards, as last read.
type runCards struct {
	// UsedBytes is their memory on the cards now; PeakBytes the most seen
	// since the run started.
	UsedBytes, PeakBytes int64
}

// cardReads is the state of the reads of the cards; one read at a time.
type cardReads struct {
	mu sync.Mutex // one read at a time; guards what follows
	// peaks is the most card memory each run was seen to hold, by run;
	// overs the runs said to be over their share, said once each.
	peaks map[uint64]int64
	overs map[uint64]bool
}

// watchCards reads the cards every cardsEvery until ctx ends. A machine
// without the library is said once, and not asked again.
func (d *Daemon) watchCards(ctx context.Context) {
	t := time.NewTicker(cardsEvery)
	defer t.Stop()
	said := ""
	for {
		err := d.readCards()
		switch {
		case errors.Is(err, probes.ErrNoNVML):
			d.log.Info("cards are known only as probed: no live view of what they hold", "reason", err)
			return
		case err != nil && err.Error() != said:
			// Said once until it changes: a driver in a bad state fails
			// every read alike.
			d.log.Warn("cannot read what the cards hold; keeping the last view", "error", err)
			said = err.Error()
		case err == nil && said != "":
			d.log.Info("the cards can be read again")
			said = ""
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// cardGrant is a run's grant as a read of the cards needs it.
type cardGrant struct {
	job   string
	grant accounting.Grant
}

// readCards reads the cards once: it turns off the cards that foreign
// processes hold and on those they left, tells the books what each card
// holds beyond its shares, and notes what each run holds.
func (d *Daemon) readCards() error {
	d.cardReads.mu.Lock()
	defer d.cardReads.mu.Unlock()
	uses, err := d.cfg.Cards.ReadCards()
	if err != nil {
		return err
	}
	states := make([]cardState, len(d.cfg.Machine.GPUs))
	live := make([]accounting.CardLive, len(states))
	held := map[uint64]int64{} // by run, its processes' memory on the cards
	grants := d.cardGrants()
	for i, name := range d.cfg.Machine.GPUs {
		use, ok := probes.UseOf(uses, d.cfg.Machine.Topology, name)
		if !ok {
			continue
		}
		st := cardState{MemoryTotal: use.MemoryTotal, MemoryUsed: use.MemoryUsed}
		procs := use.Processes
		for _, m := range use.MIG {
			procs = append(procs, m.Processes...)
		}
		onCard := map[uint64]int64{} // by run, -1 where the driver cannot say
		for _, p := range procs {
			if run, ours := d.runOfProcess(p.PID); ours {
				if p.MemoryBytes < 0 || onCard[run] < 0 {
					onCard[run] = -1
				} else {
					onCard[run] += p.MemoryBytes
				}
				continue
			}
			comm, uid := runner.Describe(p.PID)
			if comm == "" && uid < 0 {
				continue // ended since the driver answered
			}
			f := ForeignUse{PID: p.PID, MemoryBytes: p.MemoryBytes}
			f.Command, f.User = comm, userName(uid)
			st.Foreign = append(st.Foreign, f)
			if p.MemoryBytes > d.foreignLimit() {
				st.Off = true
			}
		}
		// What the runs holding the card hold on it is theirs, a share's
		// up to its share; the rest (foreign processes, the driver's own,
		// a run over its share) is outside the books.
		var covered int64
		for run, n := range onCard {
			g, granted := grants[run]
			switch {
			case !granted || !slices.Contains(g.grant.GPUs, i):
				// A run on a card it was not given (its env set
				// CUDA_VISIBLE_DEVICES): outside the books.
			case g.grant.GPUMemBytes > 0 && (n < 0 || n > g.grant.GPUMemBytes):
				covered += g.grant.GPUMemBytes
			default:
				covered += max(n, 0)
			}
			if n >= 0 && held[run] >= 0 {
				held[run] += n
			} else {
				held[run] = -1
			}
		}
		live[i] = accounting.CardLive{Off: st.Off, OutsideBytes: max(0, st.MemoryUsed-covered)}
		states[i] = st
	}
	d.noteRunCards(held, grants)
	old := d.cards.Swap(&states)
	for i, st := range states {
		was := old != nil && i < len(*old) && (*old)[i].Off
		switch {
		case st.Off && !was:
			f := st.Foreign[slices.IndexFunc(st.Foreign, func(f ForeignUse) bool { return f.MemoryBytes > d.foreignLimit() })]
			d.log.Warn("a card is in use outside berth: no job is given it whole meanwhile", "card", d.cfg.Machine.GPUs[i],
				"pid", f.PID, "command", f.Command, "user", f.User, "memory_bytes", f.MemoryBytes)
		case was && !st.Off:
			d.log.Info("a card is no longer in use outside berth", "card", d.cfg.Machine.GPUs[i])
		}
	}
	d.book.SetCards(live)
	if old == nil || !slices.EqualFunc(*old, states, sameCardState) {
		d.changed.raise()
	}
	return nil
}

// noteRunCards keeps what each run holds on the cards (held, by run; -1
// where the driver cannot say) for the status: every run in progress that
// holds cards (grants), 0 where none of its processes is on them, and any
// other run of berth's seen there. It records a run's new peak, says once
// when a run holds more than its share, and forgets the runs that ended.
// The caller holds d.cardReads.mu.
func (d *Daemon) noteRunCards(held map[uint64]int64, grants map[uint64]cardGrant) {
	r := &d.cardReads
	if r.peaks == nil {
		r.peaks, r.overs = map[uint64]int64{}, map[uint64]bool{}
	}
	now := make(map[uint64]runCards, len(held)+len(grants))
	note := func(run uint64, n int64) {
		peak := r.peaks[run]
		if n > peak {
			peak = n
			r.peaks[run] = n
			if !isLocalRunID(run) {
				d.later.SetRunGPUMemPeak(run, n)
			}
		}
		now[run] = runCards{UsedBytes: n, PeakBytes: peak}
		if g, ok := grants[run]; ok && g.grant.GPUMemBytes > 0 && n > g.grant.GPUMemBytes && !r.overs[run] {
			r.overs[run] = true
			d.jobLog(g.job).Warn("a run holds more card memory than its share", "run", run,
				"gpus", d.cardNames(g.grant.GPUs), "used_bytes", n, "gpu_mem_bytes", g.grant.GPUMemBytes)
		}
	}
	for run := range grants {
		note(run, held[run])
	}
	for run, n := range held {
		if _, granted := grants[run]; !granted {
			note(run, n)
		}
	}
	// A run in progress keeps its peak while it is off the cards: it may
	// come back to them.
	for run := range r.peaks {
		if _, on := now[run]; !on {
			delete(r.peaks, run)
			delete(r.overs, run)
		}
	}
	d.runCards.Store(&now)
}

// cardGrants is the grant of every run in progress that holds cards, by run.
func (d *Daemon) cardGrants() map[uint64]cardGrant {
	d.mu.Lock()
	jobs := make([]*job, 0, len(d.jobs))
	for _, j := range d.jobs {
		jobs = append(jobs, j)
	}
	d.mu.Unlock()
	out := map[uint64]cardGrant{}
	for _, j := range jobs {
		if v := j.view(); v.Run != 0 && len(v.Grant.GPUs) > 0 {
			out[v.Run] = cardGrant{job: j.name, grant: v.Grant}
		}
	}
	return out
}

func sameCardState(a, b cardState) bool {
	return a.Off == b.Off && a.MemoryUsed == b.MemoryUsed && slices.Equal(a.Foreign, b.Foreign)
}

// foreignLimit is how much a foreign process may hold on a card before
// the card is off.
func (d *Daemon) foreignLimit() int64 {
	return cmp.Or(d.cfg.ForeignLimit, DefaultForeignLimit)
}

// runOfProcess says which run of this berth's process pid belongs to: every
// process of a run carries its BERTH_INSTANCE and BERTH_RUN.
func (d *Daemon) runOfProcess(pid int) (uint64, bool) {
	vals, ok := runner.EnvValues(pid, "BERTH_INSTANCE", "BERTH_RUN")
	if !ok || vals[0] != d.store.Instance() {
		return 0, false
	}
	run, _ := strconv.ParseUint(vals[1], 10, 64)
	return run, true
}

// userName is uid's name, or the number where it has none; "" for -1.
func userName(uid int) string {
	if uid < 0 {
		return ""
	}
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		return u.Username
	}
	return strconv.Itoa(uid)
}

// offCards are the cards that are off now, by index, with their foreign
// use; nil when none is.
func (d *Daemon) offCards() map[int]cardState {
	states := d.cards.Load()
	if states == nil {
		return nil
	}
	var out map[int]cardState
	for i, st := range *states {
		if st.Off {
			if out == nil {
				out = map[int]cardState{}
			}
			out[i] = st
		}
	}
	return out
}
