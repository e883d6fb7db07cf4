//go:build !cgo

package probes

// NVML is the CardReader of the NVIDIA management library. This berth was
// built without cgo, which loading the library takes: it always answers
// ErrNoNVML, and the cards are only as probed.
func NVML() CardReader { return noNVML{} }

type noNVML struct{}

func (noNVML) ReadCards() ([]CardUse, error) {
	return nil, errNoCgo
}

// errNoCgo is ErrNoNVML, saying why.
var errNoCgo = wrapNoNVML("this berth was built without cgo, which loading it takes")
