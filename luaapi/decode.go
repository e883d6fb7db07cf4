package luaapi

import (
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	lua "github.com/yuin/gopher-lua"

	"github.com/berthd/berth/accounting"
)

// Tables are decoded by hand rather than with a mapper: a mapper would turn
// "8" into 8 and true into 1, and could not say which field of which job on
// which line is wrong. Every field is checked against its Lua type with no
// coercion, and every mistake is collected, so one run shows them all.

// The shapes of names. Each is, as a regular expression, ^[first][rest]*$
// with its length bounded: jobs ^[a-z0-9][a-z0-9_.-]{0,63}$, flavors
// ^[a-z][a-z0-9_-]{0,63}$, environment keys ^[A-Za-z_][A-Za-z0-9_]*$, and
// users (a quota's name, as Debian's adduser takes it)
// ^[a-z_][a-z0-9_-]{0,31}$. They are checked by hand: compiled, the
// bounded repetitions cost every berth process, the client's and the
// evaluating child's included, half a millisecond at its start.
var (
	jobNameShape    = namePattern{first: nameLower + nameDigits, rest: nameLower + nameDigits + "_.-", max: 64}
	flavorNameShape = namePattern{first: nameLower, rest: nameLower + nameDigits + "_-", max: 64}
	envKeyShape     = namePattern{first: nameUpper + nameLower + "_", rest: nameUpper + nameLower + nameDigits + "_"}
	userNameShape   = namePattern{first: nameLower + "_", rest: nameLower + nameDigits + "_-", max: 32}
)

const (
	nameLower  = "abcdefghijklmnopqrstuvwxyz"
	nameUpper  = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	nameDigits = "0123456789"
)

// namePattern is a name's shape: one byte of first, then any number of
// rest, no more than max bytes in all (0: no bound).
type namePattern struct {
	first, rest string
	max         int
}

// MatchString says whether s has the shape.
func (p namePattern) MatchString(s string) bool {
	if s == "" || p.max > 0 && len(s) > p.max || strings.IndexByte(p.first, s[0]) < 0 {
		return false
	}
	for i := 1; i < len(s); i++ {
		if strings.IndexByte(p.rest, s[i]) < 0 {
			return false
		}
	}
	return true
}

// jobFields and flavorFields are in the order they are checked and listed.
var (
	jobFields = []string{
		"cmd", "dir", "flavor", "cpus", "gpus", "gpu_mem", "ram", "swap", "env", "user", "group",
		"restart", "max_restarts", "timeout", "stop_signal", "stop_timeout",
		"priority", "on_change", "enabled", "description", "after", "after_any",
		"array", "max_parallel",
	}
	flavorFields  = []string{"cpus", "gpus", "gpu_mem", "ram"}
	quotaFields   = []string{"cpus", "gpus", "gpu_mem", "ram"}
	machineFields = []string{"cpus", "gpus", "ram", "hostname"}
)

// Bounds that catch slips (an extra zero, a sign) long before the books would.
const (
	maxCPUs        = 4096
	maxGPUs        = 1024
	minPriority    = -1000
	maxPriority    = 1000
	maxMaxRestarts = 1_000_000
	// An array's indices are jobs of their own in the daemon's books and
	// state: a bound that keeps a slip (an extra zero) from declaring a
	// million of them. 100 000 took the daemon to 350 MiB, and each berth
	// status to a second; Slurm's MaxArraySize is 1001 by default.
	maxArraySize = 10_000
	maxArrayEnd  = 1_000_000_000
)

var (
	restartChoices  = []string{"no", "on-failure", "always"}
	onChangeChoices = []string{"restart", "finish"}
	signalChoices   = []string{"SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT", "SIGKILL", "SIGUSR1", "SIGUSR2"}
	signals         = map[string]syscall.Signal{
		"TERM": syscall.SIGTERM, "INT": syscall.SIGINT, "HUP": syscall.SIGHUP,
		"QUIT": syscall.SIGQUIT, "KILL": syscall.SIGKILL, "USR1": syscall.SIGUSR1,
		"USR2": syscall.SIGUSR2,
	}
)

// decoder reads one declaration's table. errs collects its mistakes.
type decoder struct {
	s      subject
	fields map[string]lua.LValue
	errs   []*Error
}

func (d *decoder) add(e *Error) { d.errs = append(d.errs, e) }

// newDecoder reads the keys of tbl and reports the ones that are not fields.
// Metatables are ignored: a declaration is the table as written.
func newDecoder(s subject, tbl *lua.LTable, accepted []string) *decoder {
	d := &decoder{s: s, fields: make(map[string]lua.LValue)}
	known := make(map[string]bool, len(accepted))
	for _, f := range accepted {
		known[f] = true
	}
	var unknown []string
	firstPos, firstPosValue := 0, lua.LValue(lua.LNil)
	var oddKey lua.LValue
	tbl.ForEach(func(k, v lua.LValue) {
		switch key := k.(type) {
		case lua.LString:
			if known[string(key)] {
				d.fields[string(key)] = v
			} else {
				unknown = append(unknown, string(key))
			}
		case lua.LNumber:
			if i := float64(key); i == math.Trunc(i) && i >= 1 && i <= math.MaxInt32 {
				if firstPos == 0 || int(i) < firstPos {
					firstPos, firstPosValue = int(i), v
				}
				return
			}
			if oddKey == nil {
				oddKey = k
			}
		default:
			if oddKey == nil {
				oddKey = k
			}
		}
	})
	sort.Strings(unknown)
	for _, k := range unknown {
		d.add(errUnknownField(s, k, accepted))
	}
	if firstPos > 0 {
		d.add(errPositional(s, firstPos, firstPosValue))
	}
	if oddKey != nil {
		d.add(errFieldKey(s, oddKey))
	}
	return d
}

func (d *decoder) get(field string) (lua.LValue, bool) {
	v, ok := d.fields[field]
	return v, ok
}

// whole reads a whole number in [lo, hi].
func (d *decoder) whole(field string, lo, hi int64) (int, bool) {
	v, ok := d.get(field)
	if !ok {
		return 0, false
	}
	return d.wholeOf(field, v, lo, hi)
}

// wholeOf checks that v, the value of field, is a whole number in [lo, hi].
func (d *decoder) wholeOf(field string, v lua.LValue, lo, hi int64) (int, bool) {
	n, isNum := v.(lua.LNumber)
	f := float64(n)
	if !isNum || f != math.Trunc(f) || math.IsInf(f, 0) {
		if field == "gpus" && (isNum && f > 0 && f < 1 || typedCards(v)) {
			d.add(errGPUsNotWhole(d.s, v)) // a part of a card, a typed gres
			return 0, false
		}
		d.add(errNotWhole(d.s, field, v))
		return 0, false
	}
	if f < float64(lo) || f > float64(hi) {
		if field == "max_restarts" && f < 0 {
			d.add(errMaxRestartsNegative(d.s, f))
		} else {
			d.add(errRange(d.s, field, lo, hi, f))
		}
		return 0, false
	}
	return int(f), true
}

// typedCards says whether v is a string that is not a number: a card of a
// type, as Slurm's gres names one ("a100:1").
func typedCards(v lua.LValue) bool {
	str, ok := v.(lua.LString)
	if !ok {
		return false
	}
	_, err := strconv.ParseFloat(strings.TrimSpace(string(str)), 64)
	return err != nil
}

// str reads a string field. A NUL byte is refused here because every string
// field ends up in an exec call or a log line.
func (d *decoder) str(field, want string) (string, bool) {
	v, ok := d.get(field)
	if !ok {
		return "", false
	}
	s, isStr := v.(lua.LString)
	if !isStr {
		d.add(errWrongType(d.s, field, want, v))
		return "", false
	}
	if strings.IndexByte(string(s), 0) >= 0 {
		d.add(errNUL(d.s, field))
		return "", false
	}
	return string(s), true
}

// nonEmpty reads a string that names something (a user, a group).
func (d *decoder) nonEmpty(field, example string) (string, bool) {
	s, ok := d.str(field, wantString)
	if ok && strings.TrimSpace(s) == "" {
		d.add(errEmptyString(d.s, field, example))
		return "", false
	}
	return s, ok
}

func (d *decoder) choice(field string, choices []string) (string, bool) {
	v, ok := d.get(field)
	if !ok {
		return "", false
	}
	if s, isStr := v.(lua.LString); isStr {
		for _, c := range choices {
			if string(s) == c {
				return c, true
			}
		}
	}
	d.add(errChoice(d.s, field, choices, v))
	return "", false
}

func (d *decoder) boolean(field string) (bool, bool) {
	v, ok := d.get(field)
	if !ok {
		return false, false
	}
	b, isBool := v.(lua.LBool)
	if !isBool {
		d.add(errWrongType(d.s, field, wantBool, v))
		return false, false
	}
	return bool(b), true
}

func (d *decoder) size(field string) (int64, bool) {
	v, ok := d.get(field)
	if !ok {
		return 0, false
	}
	switch x := v.(type) {
	case lua.LString:
		n, err := accounting.ParseSize(string(x))
		if err != nil {
			if f, ferr := strconv.ParseFloat(strings.TrimSpace(string(x)), 64); ferr == nil && f == 0 {
				// Nothing is nothing in any unit: the field's own rule
				// for zero says what to do (trial AR: gpu_mem = "0" was
				// told to write "0G", which is then refused).
				return 0, true
			}
			d.add(errSize(d.s, field, err))
			return 0, false
		}
		return n, true
	case lua.LNumber:
		if x == 0 {
			return 0, true // as "0" is
		}
		d.add(errSizeNumber(d.s, field, float64(x)))
	default:
		d.add(errWrongType(d.s, field, wantSize, v))
	}
	return 0, false
}

// duration reads a positive duration; instead says what to do rather than
// write zero.
func (d *decoder) duration(field, instead string) (time.Duration, bool) {
	v, ok := d.get(field)
	if !ok {
		return 0, false
	}
	switch x := v.(type) {
	case lua.LString:
		t, err := accounting.ParseDuration(string(x))
		if err != nil {
			d.add(errDuration(d.s, field, err))
			return 0, false
		}
		if t <= 0 {
			d.add(errDurationZero(d.s, field, string(x), instead))
			return 0, false
		}
		return t, true
	case lua.LNumber:
		d.add(errDurationNumber(d.s, field, float64(x)))
	default:
		d.add(errWrongType(d.s, field, wantDuration, v))
	}
	return 0, false
}

// resources reads cpus, gpus and ram, with the defaults of a declaration that
// gives them directly. given reports the first of them that was present.
func (d *decoder) resources() (r accounting.Resources, given string) {
	r.CPUs = 1
	for _, f := range flavorFields {
		if _, ok := d.get(f); ok {
			given = f
			break
		}
	}
	cpusOK := true
	if n, ok := d.whole("cpus", 0, maxCPUs); ok {
		r.CPUs = n
	} else if _, present := d.get("cpus"); present {
		cpusOK = false
	}
	if n, ok := d.whole("gpus", 0, maxGPUs); ok {
		r.GPUs = n
	}
	if n, ok := d.size("gpu_mem"); ok {
		r.GPUMemBytes = n
		if n == 0 {
			// A share of nothing: the job would get no card at all.
			d.add(errZeroShare(d.s))
		}
	}
	if n, ok := d.size("ram"); ok {
		r.RAMBytes = n
	}
	if r.GPUs > 0 && r.GPUMemBytes > 0 {
		d.add(errGPUsAndShare(d.s, r.GPUs))
		r.GPUMemBytes = 0
	}
	// cpus = 0 means the books never see the job, so it cannot hold cards or
	// memory either; saying so here beats a job that silently gets neither.
	if cpusOK && r.CPUs == 0 {
		switch {
		case r.GPUs > 0:
			d.add(errUnaccountedHolds(d.s, "gpus"))
		case r.GPUMemBytes > 0:
			d.add(errUnaccountedHolds(d.s, "gpu_mem"))
		case r.RAMBytes > 0:
			d.add(errUnaccountedHolds(d.s, "ram"))
		}
	}
	return r, given
}

func decodeFlavor(s subject, tbl *lua.LTable) (Flavor, []*Error) {
	d := newDecoder(s, tbl, flavorFields)
	r, _ := d.resources()
	return Flavor{Name: s.name, Pos: s.pos, Resources: r}, d.errs
}

// decodeQuota reads a quota: each of cpus, gpus and ram bounds what the
// person's jobs hold together; one left out bounds nothing.
func decodeQuota(s subject, tbl *lua.LTable) (Quota, []*Error) {
	d := newDecoder(s, tbl, quotaFields)
	q := Quota{Name: s.name, Pos: s.pos, Limits: accounting.NoQuota}
	if n, ok := d.whole("cpus", 0, maxCPUs); ok {
		q.Limits.CPUs = n
	}
	if n, ok := d.whole("gpus", 0, maxGPUs); ok {
		q.Limits.GPUs = n
	}
	if n, ok := d.size("ram"); ok {
		q.Limits.RAMBytes = n
	}
	if n, ok := d.size("gpu_mem"); ok {
		q.Limits.GPUMemBytes = n
	}
	return q, d.errs
}

// decodeJob reads a job; owner is the person whose file declares it, ""
// for an administrator's.
func decodeJob(s subject, tbl *lua.LTable, owner string) (Job, []*Error) {
	if owner != "" {
		// Named as everyone sees it: OWNER/NAME.
		s.name = owner + "/" + s.name
	}
	d := newDecoder(s, tbl, jobFields)
	j := newJob(s.name, s.pos)
	if owner != "" {
		// A person's job is theirs: named after them, run as them.
		j.Owner, j.User = owner, owner
		for _, f := range []string{"user", "group"} {
			if _, set := d.get(f); set {
				d.add(errOwnerRuns(s, f, owner))
				delete(d.fields, f)
			}
		}
	}

	if cmd, ok := d.cmd(); ok {
		j.Cmd = cmd
	}
	if dir, ok := d.str("dir", wantAbsDir); ok {
		switch {
		case !strings.HasPrefix(dir, "/"):
			d.add(errDirRelative(s, dir))
		case len(dir) > maxPathBytes:
			d.add(errTooLong(s, "dir", len(dir), maxPathBytes, "no path is longer (Linux's PATH_MAX)"))
		default:
			j.Dir = dir
		}
	}
	if flavor, ok := d.str("flavor", wantFlavorName); ok {
		if !flavorNameShape.MatchString(flavor) {
			d.add(errFlavorRef(s, flavor))
		} else {
			j.Flavor = flavor
		}
	}
	if _, hasFlavor := d.get("flavor"); hasFlavor {
		// Still read cpus/gpus/gpu_mem/ram so their own mistakes are
		// reported too.
		_, given := d.resources()
		if given != "" && j.Flavor != "" {
			d.add(errFlavorAndResources(s, given, j.Flavor))
		}
		j.Resources = accounting.Resources{}
	} else {
		j.Resources, _ = d.resources()
	}
	if n, ok := d.size("swap"); ok {
		j.SwapBytes = n
	}
	if env, ok := d.env(); ok {
		j.Env = env
	}
	if n := argsBytes(j.Cmd, j.Env); n > maxArgsBytes {
		d.add(errArgsTooLong(s, n))
	}
	if user, ok := d.nonEmpty("user", "ml"); ok {
		if len(user) > maxLoginBytes {
			d.add(errTooLong(s, "user", len(user), maxLoginBytes, "no user is named longer (Linux's LOGIN_NAME_MAX)"))
		} else {
			j.User = user
		}
	}
	if group, ok := d.nonEmpty("group", "ml"); ok {
		if len(group) > maxLoginBytes {
			d.add(errTooLong(s, "group", len(group), maxLoginBytes, "no group is named longer (Linux's LOGIN_NAME_MAX)"))
		} else {
			j.Group = group
		}
	}
	if r, ok := d.choice("restart", restartChoices); ok {
		j.Restart = map[string]Restart{"no": RestartNo, "on-failure": RestartOnFailure, "always": RestartAlways}[r]
	}
	if n, ok := d.whole("max_restarts", 0, maxMaxRestarts); ok {
		j.MaxRestarts = n
	}
	if t, ok := d.duration("timeout", insteadNoTimeout); ok {
		j.Timeout = t
	}
	if sig, ok := d.signal(); ok {
		j.StopSignal = sig
	}
	if t, ok := d.duration("stop_timeout", insteadDefaultStopTimeout); ok {
		j.StopTimeout = t
	}
	if n, ok := d.whole("priority", minPriority, maxPriority); ok {
		j.Priority = n
	}
	if o, ok := d.choice("on_change", onChangeChoices); ok {
		j.OnChange = map[string]OnChange{"restart": OnChangeRestart, "finish": OnChangeFinish}[o]
	}
	if b, ok := d.boolean("enabled"); ok {
		j.Enabled = b
	}
	if desc, ok := d.str("description", wantString); ok {
		if len(desc) > maxDescriptionBytes {
			d.add(errTooLong(s, "description", len(desc), maxDescriptionBytes, "a description is a line or two that berth show prints; put more in a README beside the file"))
		} else {
			j.Description = desc
		}
	}
	if names, ok := d.jobNames("after"); ok {
		j.After = names
	}
	if names, ok := d.jobNames("after_any"); ok {
		j.AfterAny = names
	}
	if n := len(j.After) + len(j.AfterAny); n > MaxParents {
		d.add(errTooManyParents(s, "after", n))
	}
	if r, ok := d.array(); ok {
		j.Array = &r
	}
	if n, ok := d.whole("max_parallel", 1, maxArraySize); ok {
		if _, isArray := d.get("array"); !isArray {
			d.add(errMaxParallelAlone(s))
		} else {
			j.MaxParallel = n
		}
	}
	return j, d.errs
}

// array reads the indices of an array: a count N (indices 1 to N), or a
// range { from = A, to = B }, both ends included.
func (d *decoder) array() (Range, bool) {
	v, ok := d.get("array")
	if !ok {
		return Range{}, false
	}
	switch x := v.(type) {
	case lua.LNumber:
		n, ok := d.wholeOf("array", v, 1, maxArraySize)
		return Range{From: 1, To: n}, ok
	case *lua.LTable:
		var from, to lua.LValue
		var odd []string // keys that are not from or to, as named
		positional := false
		x.ForEach(func(k, v lua.LValue) {
			switch k {
			case lua.LString("from"):
				from = v
			case lua.LString("to"):
				to = v
			default:
				if s, ok := k.(lua.LString); ok {
					odd = append(odd, string(s))
				} else {
					positional = true
				}
			}
		})
		switch {
		case positional, from == nil && to == nil && len(odd) == 0:
			d.add(errArrayForm(d.s, v))
			return Range{}, false
		case len(odd) > 0 || from == nil || to == nil:
			// Named keys, not quite a range's: say which.
			d.add(errArrayKeys(d.s, odd, from == nil, to == nil))
			return Range{}, false
		}
		lo, okFrom := d.wholeOf("array.from", from, 0, maxArrayEnd)
		hi, okTo := d.wholeOf("array.to", to, 0, maxArrayEnd)
		if !okFrom || !okTo {
			return Range{}, false
		}
		r := Range{From: lo, To: hi}
		if hi < lo || r.Size() > maxArraySize {
			d.add(errArrayRange(d.s, r, maxArraySize))
			return Range{}, false
		}
		return r, true
	}
	d.add(errArrayForm(d.s, v))
	return Range{}, false
}

// jobNames reads a dependency: a job name, or a list of them. A name is
// NAME, or OWNER/NAME for a person's job; Combine resolves a bare one.
// Names listed twice are kept once.
func (d *decoder) jobNames(field string) ([]string, bool) {
	v, ok := d.get(field)
	if !ok {
		return nil, false
	}
	var given []lua.LValue
	switch x := v.(type) {
	case lua.LString:
		given = []lua.LValue{x}
	case *lua.LTable:
		n := 0
		var badKey lua.LValue
		x.ForEach(func(k, _ lua.LValue) {
			n++
			if i, isNum := k.(lua.LNumber); !isNum || float64(i) != math.Trunc(float64(i)) || i < 1 || int(i) > x.Len() {
				if badKey == nil {
					badKey = k
				}
			}
		})
		if badKey != nil || n != x.Len() {
			d.add(errWrongType(d.s, field, wantJobNames, v))
			return nil, false
		}
		for i := 1; i <= n; i++ {
			given = append(given, x.RawGetInt(i))
		}
	default:
		d.add(errWrongType(d.s, field, wantJobNames, v))
		return nil, false
	}
	if len(given) > MaxParents {
		d.add(errTooManyParents(d.s, field, len(given)))
		return nil, false
	}
	names := make([]string, 0, len(given))
	ok = true
	for _, g := range given {
		s, isStr := g.(lua.LString)
		if !isStr {
			d.add(errWrongType(d.s, field, wantJobNames, g))
			ok = false
			continue
		}
		if !validJobRef(string(s)) {
			d.add(errJobRef(d.s, field, string(s)))
			ok = false
			continue
		}
		if !slices.Contains(names, string(s)) {
			names = append(names, string(s))
		}
	}
	return names, ok
}

// validJobRef reports whether s can name a job: NAME or OWNER/NAME.
func validJobRef(s string) bool {
	if owner, name, person := strings.Cut(s, "/"); person {
		return userNameShape.MatchString(owner) && jobNameShape.MatchString(name)
	}
	return jobNameShape.MatchString(s)
}

// cmd reads argv: a list of strings, or a string run by /bin/sh -c.
func (d *decoder) cmd() ([]string, bool) {
	v, ok := d.get("cmd")
	if !ok {
		d.add(errMissingCmd(d.s))
		return nil, false
	}
	switch x := v.(type) {
	case lua.LString:
		s := string(x)
		if strings.TrimSpace(s) == "" {
			d.add(errEmptyCmd(d.s))
			return nil, false
		}
		if strings.IndexByte(s, 0) >= 0 {
			d.add(errNUL(d.s, "cmd"))
			return nil, false
		}
		if len(s) > maxArgBytes {
			d.add(errArgTooLong(d.s, "cmd", "the command", len(s)))
			return nil, false
		}
		return []string{"/bin/sh", "-c", s}, true
	case *lua.LTable:
		return d.argv(x)
	default:
		d.add(errCmdType(d.s, v))
		return nil, false
	}
}

func (d *decoder) argv(t *lua.LTable) ([]string, bool) {
	// A list is the keys 1..n and nothing else; anything else is a mistake
	// worth naming rather than an argv with a hole in it.
	n := 0
	var badKey lua.LValue
	t.ForEach(func(k, _ lua.LValue) {
		n++
		if i, ok := k.(lua.LNumber); !ok || float64(i) != math.Trunc(float64(i)) || i < 1 {
			if badKey == nil {
				badKey = k
			}
		}
	})
	if badKey != nil {
		d.add(errCmdKey(d.s, badKey))
		return nil, false
	}
	if n == 0 {
		d.add(errEmptyCmd(d.s))
		return nil, false
	}
	argv := make([]string, 0, n)
	ok := true
	for i := 1; i <= n; i++ {
		v := t.RawGetInt(i)
		s, isStr := v.(lua.LString)
		switch {
		case v == lua.LNil:
			// n keys but a gap below n: some key is beyond the end.
			d.add(errCmdElement(d.s, i, v))
			return nil, false
		case !isStr:
			d.add(errCmdElement(d.s, i, v))
			ok = false
		case strings.IndexByte(string(s), 0) >= 0:
			d.add(errNUL(d.s, "cmd"))
			ok = false
		case len(s) > maxArgBytes:
			d.add(errArgTooLong(d.s, "cmd", "argument "+strconv.Itoa(i), len(s)))
			ok = false
		default:
			argv = append(argv, string(s))
		}
	}
	if ok && argv[0] == "" {
		d.add(errCmdProgramEmpty(d.s))
		ok = false
	}
	return argv, ok
}

// env reads a table of NAME = value. Numbers are written the way Lua prints
// them (8, not 8.0), because `env = { SEED = 3 }` plainly means "3".
func (d *decoder) env() (map[string]string, bool) {
	v, ok := d.get("env")
	if !ok {
		return nil, false
	}
	t, isTable := v.(*lua.LTable)
	if !isTable {
		d.add(errWrongType(d.s, "env", wantEnv, v))
		return nil, false
	}
	env := make(map[string]string)
	type kv struct {
		k string
		v lua.LValue
	}
	var pairs []kv
	var badKeys []lua.LValue
	t.ForEach(func(k, v lua.LValue) {
		if s, isStr := k.(lua.LString); isStr {
			pairs = append(pairs, kv{string(s), v})
		} else {
			badKeys = append(badKeys, k)
		}
	})
	sort.Slice(pairs, func(i, j int) bool { return pairs[i].k < pairs[j].k })
	ok = true
	if len(badKeys) > 0 {
		d.add(errEnvKeyType(d.s, badKeys[0]))
		ok = false
	}
	for _, p := range pairs {
		if !envKeyShape.MatchString(p.k) {
			d.add(errEnvKey(d.s, p.k))
			ok = false
			continue
		}
		// BERTH_RUN and its kin are how berth finds a run's processes,
		// those that left its group included: a job that set them could
		// hide what it leaves running from the stop that should end it.
		if strings.HasPrefix(p.k, accounting.ReservedPrefix) {
			d.add(errEnvReserved(d.s, p.k))
			ok = false
			continue
		}
		var val string
		switch x := p.v.(type) {
		case lua.LString:
			val = string(x)
		case lua.LNumber:
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				d.add(errEnvValue(d.s, p.k, p.v))
				ok = false
				continue
			}
			val = x.String() // as tostring writes it: 2^53 is 9007199254740992
		default:
			d.add(errEnvValue(d.s, p.k, p.v))
			ok = false
			continue
		}
		if strings.IndexByte(val, 0) >= 0 {
			d.add(errEnvNUL(d.s, p.k))
			ok = false
			continue
		}
		if r, bad := envValueBad(val); bad {
			d.add(errEnvControl(d.s, p.k, r))
			ok = false
			continue
		}
		if n := len(p.k) + 1 + len(val); n > maxArgBytes {
			d.add(errArgTooLong(d.s, "env", quote(p.k)+"="+"…", n))
			ok = false
			continue
		}
		env[p.k] = val
	}
	if !ok {
		return nil, false
	}
	if len(env) == 0 {
		return nil, true
	}
	return env, true
}

// envValueBad finds what systemd refuses in a variable's value (a run as a
// unit gets its environment through systemd): bytes that are not UTF-8
// (r is then utf8.RuneError) or a control character other than tab and
// newline. A job runs alike whichever runner starts it, so the file is
// refused either way.
func envValueBad(v string) (r rune, bad bool) {
	if !utf8.ValidString(v) {
		return utf8.RuneError, true
	}
	for _, r := range v {
		if (r < 0x20 && r != '\t' && r != '\n') || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return r, true
		}
	}
	return 0, false
}

// signal accepts "SIGTERM", "TERM" and "term" alike.
func (d *decoder) signal() (syscall.Signal, bool) {
	v, ok := d.get("stop_signal")
	if !ok {
		return 0, false
	}
	if s, isStr := v.(lua.LString); isStr {
		name := strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(string(s))), "SIG")
		if sig, known := signals[name]; known {
			return sig, true
		}
	}
	d.add(errChoice(d.s, "stop_signal", signalChoices, v))
	return 0, false
}
