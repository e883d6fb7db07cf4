package supervisor

import (
	"context"
	"errors"
	"os/user"
	"slices"
	"strconv"
	"time"

	"github.com/berthd/berth/accounting"
	"github.com/berthd/berth/probes"
	"github.com/berthd/berth/supervisor/runner"
)

// The cards as they are: every cardsEvery the daemon asks the driver (a
// probes.CardReader, NVML) what each of its cards holds. A process on a
// card that berth did not start (its environment lacks this berth's
// BERTH_INSTANCE) is foreign; a card on which a foreign process holds more
// than foreignLimit is off for the books, so that a job asking for whole
// cards is not placed where a hand-started server already sits, and its
// why says which card and whose process. Read off the event loop; the
// books and the status read the last answer.

// cardsEvery is how often the cards are read.
const cardsEvery = 5 * time.Second

// foreignLimit is how much memory a foreign process may hold on a card
// before the card is off: a process of a desktop or a monitor holds a few
// hundred MiB.
const foreignLimit = 1 << 30

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
	// Off: a foreign process holds more than foreignLimit; no job is
	// given the card meanwhile.
	Off bool
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

// readCards reads the cards once, and turns off the cards that foreign
// processes hold and on those they left.
func (d *Daemon) readCards() error {
	uses, err := d.cfg.Cards.ReadCards()
	if err != nil {
		return err
	}
	states := make([]cardState, len(d.cfg.Machine.GPUs))
	live := make([]accounting.CardLive, len(states))
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
		for _, p := range procs {
			if d.isBerths(p.PID) {
				continue
			}
			comm, uid := runner.Describe(p.PID)
			if comm == "" && uid < 0 {
				continue // ended since the driver answered
			}
			f := ForeignUse{PID: p.PID, MemoryBytes: p.MemoryBytes}
			f.Command, f.User = comm, userName(uid)
			st.Foreign = append(st.Foreign, f)
			if p.MemoryBytes > foreignLimit {
				st.Off = true
			}
		}
		live[i].Off = st.Off
		states[i] = st
	}
	old := d.cards.Swap(&states)
	for i, st := range states {
		was := old != nil && i < len(*old) && (*old)[i].Off
		switch {
		case st.Off && !was:
			f := st.Foreign[0]
			d.log.Warn("a card is in use outside berth: no job is given it meanwhile", "card", d.cfg.Machine.GPUs[i],
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

func sameCardState(a, b cardState) bool {
	return a.Off == b.Off && a.MemoryUsed == b.MemoryUsed && slices.Equal(a.Foreign, b.Foreign)
}

// isBerths says whether process pid is a run of this berth's: every
// process of a run carries its BERTH_INSTANCE.
func (d *Daemon) isBerths(pid int) bool {
	v, ok := runner.EnvOf(pid, "BERTH_INSTANCE")
	return ok && v == d.store.Instance()
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
