package probes

// What the cards hold now, as the driver's management library (NVML) says
// it: asked again every few seconds, since processes berth did not start
// come and go. The daemon takes it through a CardReader; tests give it
// fixtures of real machines.

// CardUse is one card (or MIG instance) as NVML reports it now.
type CardUse struct {
	// Index is NVML's index of the card (PCI bus order).
	Index int
	UUID  string // "GPU-…", or "MIG-…" for an instance
	Model string
	// PCI is the card's bus location, "0000:3b:00.0", lower case.
	PCI string
	// MemoryTotal and MemoryUsed are bytes.
	MemoryTotal int64
	MemoryUsed  int64
	// Processes are those with a context on the card.
	Processes []CardProcess
	// MIG are the card's MIG instances, when MIG is on.
	MIG []CardUse
}

// CardProcess is one process with memory on a card.
type CardProcess struct {
	PID         int
	MemoryBytes int64 // -1 when NVML cannot say
}

// CardReader reads what the cards hold now. ErrNoNVML (wrapped) says the
// library is not there: the machine's cards are then known only as the
// probes see them, and none is ever off.
type CardReader interface {
	ReadCards() ([]CardUse, error)
}

// ErrNoNVML says the NVIDIA management library could not be loaded.
var ErrNoNVML = errNoNVML{}

type errNoNVML struct{}

func (errNoNVML) Error() string {
	return "the NVIDIA management library (libnvidia-ml.so.1) is not there"
}

// wrapNoNVML is ErrNoNVML with why.
func wrapNoNVML(why string) error { return noNVMLBecause(why) }

type noNVMLBecause string

func (e noNVMLBecause) Error() string { return ErrNoNVML.Error() + ": " + string(e) }
func (e noNVMLBecause) Unwrap() error { return ErrNoNVML }
