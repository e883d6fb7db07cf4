package accounting

import (
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

// ThreadVars are the variables through which libraries read how many threads
// they may use: OpenMP and the BLAS family (what NumPy, SciPy, PyTorch and
// scikit-learn use underneath), then Go, Rust's rayon, Julia, Numba and BLIS.
// They are set together because one process usually loads several of them,
// and each sizes its pool to every core unless told.
var ThreadVars = []string{
	"OMP_NUM_THREADS",
	"OPENBLAS_NUM_THREADS",
	"MKL_NUM_THREADS",
	"VECLIB_MAXIMUM_THREADS",
	"NUMEXPR_NUM_THREADS",
	"GOMAXPROCS",
	"RAYON_NUM_THREADS",
	"JULIA_NUM_THREADS",
	"NUMBA_NUM_THREADS",
	"BLIS_NUM_THREADS",
}

// ShareVars are set for a run given a share of a card (Grant.GPUMemBytes),
// so that the frameworks that would take the whole card at start take no
// more than the share: JAX preallocates XLA_PYTHON_CLIENT_MEM_FRACTION of
// the card (the share's part of the card's memory, rounded down to a
// thousandth), TensorFlow with TF_FORCE_GPU_ALLOW_GROWTH allocates as it
// needs instead of mapping nearly all of it. PyTorch allocates as it needs
// already; it has no variable for a bound, and reads BERTH_GPU_MEM from a
// script (torch.cuda.set_per_process_memory_fraction).
var ShareVars = []string{"XLA_PYTHON_CLIENT_MEM_FRACTION", "TF_FORCE_GPU_ALLOW_GROWTH"}

// CardVars are set for a run's cards: which it may open, and the order
// their indices count in (below, Env).
var CardVars = []string{"CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"}

// ReservedPrefix starts the names of the variables berth sets on every run
// (BERTH_JOB, BERTH_RUN, BERTH_CPUS, BERTH_GPUS, BERTH_GPU_MEM for a share,
// BERTH_ARRAY_INDEX, BERTH_ARRAY_SIZE, and the supervisor's
// BERTH_INSTANCE). They are how berth finds a run's processes, those that
// left its process group included, so a job may not set any name with
// this prefix: the loader refuses it, and Env writes berth's own last.
const ReservedPrefix = "BERTH_"

// RunVars are the names with ReservedPrefix that berth sets on a run, as
// listed above; the daemon's own environment may hold others (its
// BERTH_SOCKET), which pass on to the run as they are.
var RunVars = []string{"BERTH_JOB", "BERTH_RUN", "BERTH_CPUS", "BERTH_GPUS", "BERTH_GPU_MEM", "BERTH_ARRAY_INDEX", "BERTH_ARRAY_SIZE", "BERTH_INSTANCE"}

// EnvInput is everything the environment of a run depends on.
type EnvInput struct {
	// Daemon is the daemon's own environment: the base of every job's.
	Daemon map[string]string
	// Login is what login would set for the user the job runs as (HOME,
	// USER, LOGNAME, SHELL), over the daemon's own; nil when the job runs
	// as the daemon's user.
	Login map[string]string
	Job   string
	Run   string
	// Dir is the run's working directory, which PWD names as a shell
	// would set it: a program that reads PWD rather than asking the
	// kernel (getcwd) is told where it is, not where the daemon was
	// started. Empty: PWD is left as the daemon's environment has it.
	Dir string
	// Array, for a run of an index of an array, is the index and the
	// array's size (BERTH_ARRAY_INDEX, BERTH_ARRAY_SIZE); nil otherwise.
	Array *ArrayIndex
	// Grant is what the run was given; ignored when Unaccounted.
	Grant Grant
	// Unaccounted runs (cpus = 0) hold nothing and are advised a fair share
	// of threads instead: MachineCPUs divided by UnaccountedJobs.
	Unaccounted     bool
	MachineCPUs     int
	UnaccountedJobs int
	// Cards are the machine's card names, by index, as the daemon's own
	// CUDA_VISIBLE_DEVICES names them ("2", "GPU-…", "MIG-…"), or "0".."n-1".
	Cards []string
	// HasCards says the machine has cards even where Cards is empty: the
	// operator gave none of them to berth (--gpus 0), and a job must not
	// see them either.
	HasCards bool
	// CardMem is each card's memory in bytes, by index (0 where unknown):
	// a share's part of its card.
	CardMem []int64
	// Declared is the job's own env; it wins over everything but the
	// variables named with ReservedPrefix, which are berth's.
	Declared map[string]string
}

// Env returns the whole environment a run starts with. Precedence, lowest
// first: the daemon's environment, then what the job's user and grant imply
// (its login variables, thread counts, cards), then what the
// job declared — a declaration is a deliberate statement about this job and
// outranks any default. Berth's own BERTH_ variables come last whatever was
// declared: a run that could rename itself could hide its processes from
// the sweep that stops them.
//
// Composed strings such as XLA_FLAGS are never derived: their contents depend
// on the library's version, and writing them would silently replace what the
// author put there. They travel in the job's env, where they are visible.
func Env(in EnvInput) map[string]string {
	over := EnvOver(in)
	env := make(map[string]string, len(in.Daemon)+len(over))
	maps.Copy(env, in.Daemon)
	maps.Copy(env, over)
	return env
}

// EnvOver is what Env lays over the daemon's environment: Env less the
// daemon's entries that nothing replaces. The daemon's environment is the
// same for every run, and most of a run's: a caller that keeps it, made
// once, merges it with EnvOver's few entries rather than copying it into a
// map for every run.
func EnvOver(in EnvInput) map[string]string {
	env := make(map[string]string, len(in.Login)+len(ThreadVars)+8+len(in.Declared))
	for k, v := range in.Login {
		env[k] = v
	}
	if in.Dir != "" {
		env["PWD"] = in.Dir
	}

	cpus := len(in.Grant.CPUIDs)
	if in.Unaccounted {
		cpus = max(1, in.MachineCPUs/max(1, in.UnaccountedJobs))
	}
	for _, name := range ThreadVars {
		// An unaccounted job's share is only advice: a thread count the
		// operator set on the daemon is an answer, and the share a default.
		// One that is no count (empty, 0, -1) says nothing: OpenMP takes
		// it as unset, every core.
		if n, err := strconv.Atoi(strings.TrimSpace(in.Daemon[name])); in.Unaccounted && err == nil && n > 0 {
			continue // the daemon's entry stands
		}
		env[name] = strconv.Itoa(cpus)
	}

	var cards []string
	if !in.Unaccounted {
		cards = make([]string, len(in.Grant.GPUs))
		for i, index := range in.Grant.GPUs {
			cards[i] = cardName(in.Cards, index)
		}
	}
	// On a machine with cards, a job given none must see none: otherwise it
	// can preallocate a card that someone else was granted, or one the
	// operator kept out of berth's hands.
	if len(in.Cards) > 0 || in.HasCards {
		env["CUDA_VISIBLE_DEVICES"] = strings.Join(cards, ",")
	}
	// A card named by an index is the card of that place in PCI bus order
	// to the books (the driver's, NVML's and nvidia-smi's order, and the
	// device nodes a unit may open), and to CUDA only with this: its
	// default puts the fastest card first, so on a box of mixed cards
	// "1" would open another card than the one granted.
	if slices.ContainsFunc(cards, isIndex) {
		env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
	}
	share := !in.Unaccounted && in.Grant.GPUMemBytes > 0 && len(in.Grant.GPUs) == 1
	if share {
		if c := in.Grant.GPUs[0]; c < len(in.CardMem) && in.CardMem[c] > 0 {
			env["XLA_PYTHON_CLIENT_MEM_FRACTION"] = memFraction(in.Grant.GPUMemBytes, in.CardMem[c])
		}
		env["TF_FORCE_GPU_ALLOW_GROWTH"] = "true"
	}

	for k, v := range in.Declared {
		if !strings.HasPrefix(k, ReservedPrefix) {
			env[k] = v
		}
	}

	env["BERTH_JOB"] = in.Job
	env["BERTH_RUN"] = in.Run
	env["BERTH_CPUS"] = strconv.Itoa(cpus)
	env["BERTH_GPUS"] = strings.Join(cards, ",")
	if share {
		env["BERTH_GPU_MEM"] = strconv.FormatInt(in.Grant.GPUMemBytes, 10)
	}
	if in.Array != nil {
		env["BERTH_ARRAY_INDEX"] = strconv.Itoa(in.Array.Index)
		env["BERTH_ARRAY_SIZE"] = strconv.Itoa(in.Array.Size)
	}
	return env
}

// ArrayIndex is one index of an array, and how many indices it has.
type ArrayIndex struct {
	Index int
	Size  int
}

// memFraction is share's part of a card of mem bytes, rounded down to a
// thousandth (a framework told more would take more than the share), and
// at least a thousandth.
func memFraction(share, mem int64) string {
	f := math.Floor(float64(share)/float64(mem)*1000) / 1000
	return strconv.FormatFloat(max(0.001, min(1, f)), 'f', -1, 64)
}

// isIndex says whether a card's name is an index ("2"), not a UUID
// ("GPU-…", "MIG-…").
func isIndex(name string) bool {
	_, err := strconv.ParseUint(name, 10, 32)
	return err == nil
}

func cardName(cards []string, index int) string {
	if index >= 0 && index < len(cards) {
		return cards[index]
	}
	return strconv.Itoa(index)
}
