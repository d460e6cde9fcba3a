package ptxgen

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/commsim/commsim/hw"
)

// This file runs the generated PTX on the CPU: a small interpreter for the
// instructions ptxgen emits, one thread at a time. It checks the kernels'
// logic (indexing, vector lanes, register use, NaN and ±0 handling, integer
// division) bit for bit against hw.ReduceBytes and hw.DivideBytes without a
// GPU. It takes the hardware's word for the single instructions (a correctly
// rounded add.rn, cvt.rn.f16.f32 rounding to nearest even), which the
// interpreter models with Go's float32/float64 and hw's conversions.

type instr struct {
	pred  string // "" or "%p1" / "!%p1"
	op    string // e.g. "add.rn.f32"
	args  []string
	label string // for a label line
}

type kernelCode struct {
	name   string
	params []string
	code   []instr
	labels map[string]int
}

func parseModule(t *testing.T, src string) map[string]*kernelCode {
	out := map[string]*kernelCode{}
	var k *kernelCode
	inBody := false
	for _, line := range strings.Split(src, "\n") {
		if i := strings.Index(line, "//"); i >= 0 {
			line = line[:i]
		}
		line = strings.TrimSpace(line)
		switch {
		case line == "":
		case strings.HasPrefix(line, ".visible .entry "):
			name := strings.TrimSuffix(strings.TrimPrefix(line, ".visible .entry "), "(")
			k = &kernelCode{name: name, labels: map[string]int{}}
			out[name] = k
		case strings.HasPrefix(line, ".param .u64 ") && k != nil && !inBody:
			k.params = append(k.params, strings.TrimSuffix(strings.TrimPrefix(line, ".param .u64 "), ","))
		case line == "{":
			inBody = true
		case line == "}":
			inBody = false
		case !inBody || strings.HasPrefix(line, ".reg"):
		case strings.HasSuffix(line, ":"):
			k.labels[strings.TrimSuffix(line, ":")] = len(k.code)
		default:
			line = strings.TrimSuffix(line, ";")
			var in instr
			if strings.HasPrefix(line, "@") {
				sp := strings.IndexByte(line, ' ')
				in.pred, line = line[1:sp], strings.TrimSpace(line[sp:])
			}
			sp := strings.IndexByte(line, ' ')
			if sp < 0 {
				in.op = line
			} else {
				in.op, in.args = line[:sp], splitArgs(line[sp+1:])
			}
			k.code = append(k.code, in)
		}
	}
	if len(out) == 0 {
		t.Fatal("no kernels parsed")
	}
	return out
}

// splitArgs splits operands at commas outside braces.
func splitArgs(s string) []string {
	var out []string
	depth, start := 0, 0
	for i, c := range s {
		switch c {
		case '{':
			depth++
		case '}':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, strings.TrimSpace(s[start:i]))
				start = i + 1
			}
		}
	}
	return append(out, strings.TrimSpace(s[start:]))
}

// machine is one thread's state plus the global memory.
type machine struct {
	t                        *testing.T
	k                        *kernelCode
	regs                     map[string]uint64
	params                   map[string]uint64
	mem                      []byte // global memory at address base
	base                     uint64
	ctaid, ntid, tid, nctaid uint64
}

func (m *machine) val(a string) uint64 {
	switch {
	case strings.HasPrefix(a, "%"):
		switch a {
		case "%ctaid.x":
			return m.ctaid
		case "%ntid.x":
			return m.ntid
		case "%tid.x":
			return m.tid
		case "%nctaid.x":
			return m.nctaid
		}
		return m.regs[a]
	case strings.HasPrefix(a, "0f"):
		v, err := strconv.ParseUint(a[2:], 16, 32)
		m.check(err)
		return v
	case strings.HasPrefix(a, "0d"):
		v, err := strconv.ParseUint(a[2:], 16, 64)
		m.check(err)
		return v
	case strings.HasPrefix(a, "0x"):
		v, err := strconv.ParseUint(a[2:], 16, 64)
		m.check(err)
		return v
	}
	v, err := strconv.ParseInt(a, 10, 64)
	m.check(err)
	return uint64(v)
}

func (m *machine) check(err error) {
	if err != nil {
		m.t.Fatal(err)
	}
}

func (m *machine) addr(a string, n int) []byte {
	a = strings.Trim(a, "[]")
	p := m.regs[a]
	if p < m.base || p+uint64(n) > m.base+uint64(len(m.mem)) {
		m.t.Fatalf("%s: access of %d bytes at %#x outside memory", m.k.name, n, p)
	}
	if p%uint64(n) != 0 && n <= 16 {
		m.t.Fatalf("%s: misaligned access of %d bytes at %#x", m.k.name, n, p)
	}
	return m.mem[p-m.base : p-m.base+uint64(n)]
}

func widthOf(typ string) int {
	n, err := strconv.Atoi(typ[1:])
	if err != nil {
		panic(typ)
	}
	return n
}

func mask(v uint64, w int) uint64 {
	if w >= 64 {
		return v
	}
	return v & (1<<w - 1)
}

func sext(v uint64, w int) int64 { return int64(v<<(64-w)) >> (64 - w) }

func f32(v uint64) float32 { return math.Float32frombits(uint32(v)) }
func f64(v uint64) float64 { return math.Float64frombits(v) }
func b32(f float32) uint64 { return uint64(math.Float32bits(f)) }
func b64(f float64) uint64 { return math.Float64bits(f) }

// run executes the kernel for one thread.
func (m *machine) run() {
	for pc, steps := 0, 0; pc < len(m.k.code); steps++ {
		if steps > 1e7 {
			m.t.Fatalf("%s: runaway", m.k.name)
		}
		in := m.k.code[pc]
		pc++
		if in.pred != "" {
			p := m.regs[strings.TrimPrefix(in.pred, "!")] != 0
			if strings.HasPrefix(in.pred, "!") {
				p = !p
			}
			if !p {
				continue
			}
		}
		if in.op == "ret" {
			return
		}
		if in.op == "bra" {
			pc = m.k.labels[in.args[0]]
			continue
		}
		m.exec(in)
	}
}

func (m *machine) set(r string, v uint64) { m.regs[r] = v }

func (m *machine) exec(in instr) {
	parts := strings.Split(in.op, ".")
	a := in.args
	typ := parts[len(parts)-1]
	switch parts[0] {
	case "ld":
		if parts[1] == "param" {
			m.set(a[0], m.params[strings.Trim(a[1], "[]")])
			return
		}
		m.load(parts, a)
		return
	case "st":
		m.store(parts, a)
		return
	case "cvta", "mov":
		if strings.HasPrefix(a[0], "{") { // unpack a 32-bit word into halves
			rs := splitArgs(strings.Trim(a[0], "{}"))
			v := m.val(a[1])
			for i, r := range rs {
				m.set(r, (v>>(16*i))&0xFFFF)
			}
			return
		}
		if strings.HasPrefix(a[1], "{") {
			rs := splitArgs(strings.Trim(a[1], "{}"))
			var v uint64
			for i, r := range rs {
				v |= (m.val(r) & 0xFFFF) << (16 * i)
			}
			m.set(a[0], v)
			return
		}
		m.set(a[0], m.val(a[1]))
		return
	case "cvt":
		m.cvt(parts, a)
		return
	case "setp":
		m.set(a[0], bool2(m.compare(parts[1], typ, m.val(a[1]), m.val(a[2]))))
		return
	case "selp":
		if m.val(a[3]) != 0 {
			m.set(a[0], m.val(a[1]))
		} else {
			m.set(a[0], m.val(a[2]))
		}
		return
	case "testp":
		v := m.val(a[1])
		nan := typ == "f32" && f32(v) != f32(v) || typ == "f64" && f64(v) != f64(v)
		m.set(a[0], bool2(nan))
		return
	case "or":
		m.set(a[0], bool2(m.val(a[1]) != 0 || m.val(a[2]) != 0))
		return
	case "bfe":
		pos, n := m.val(a[2]), m.val(a[3])
		m.set(a[0], (m.val(a[1])>>pos)&(1<<n-1))
		return
	case "bfi":
		pos, n := m.val(a[3]), m.val(a[4])
		msk := uint64(1<<n-1) << pos
		m.set(a[0], m.val(a[2])&^msk|(m.val(a[1])<<pos)&msk)
		return
	}
	x, y := m.val(a[1]), uint64(0)
	if len(a) > 2 {
		y = m.val(a[2])
	}
	if typ == "f32" || typ == "f64" {
		m.set(a[0], interpFloat(m, parts[0], typ, x, y))
		return
	}
	w := widthOf(typ)
	signed := typ[0] == 's'
	var r uint64
	switch parts[0] {
	case "add":
		r = x + y
	case "sub":
		r = x - y
	case "mul":
		switch parts[1] {
		case "lo":
			r = x * y
		case "wide":
			r = mask(x, 32) * mask(y, 32)
			w = 64
		}
	case "mad":
		z := m.val(a[3])
		if parts[1] == "wide" {
			r, w = mask(x, 32)*mask(y, 32)+z, 64
		} else {
			r = x*y + z
		}
	case "and":
		r = x & y
	case "xor":
		r = x ^ y
	case "shl":
		r = x << y
	case "shr":
		if signed {
			r = uint64(sext(mask(x, w), w) >> y)
		} else {
			r = mask(x, w) >> y
		}
	case "min", "max":
		less := mask(x, w) < mask(y, w)
		if signed {
			less = sext(x, w) < sext(y, w)
		}
		if less == (parts[0] == "min") {
			r = x
		} else {
			r = y
		}
	case "div":
		if signed {
			r = uint64(sext(x, w) / sext(y, w))
		} else {
			r = mask(x, w) / mask(y, w)
		}
	default:
		m.t.Fatalf("%s: unknown instruction %s", m.k.name, in.op)
	}
	m.set(a[0], mask(r, w))
}

func bool2(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

func (m *machine) compare(cmp, typ string, x, y uint64) bool {
	w := widthOf(typ)
	x, y = mask(x, w), mask(y, w)
	switch cmp {
	case "gt":
		return x > y
	case "ge":
		return x >= y
	case "lt":
		return x < y
	}
	m.t.Fatalf("setp.%s", cmp)
	return false
}

func interpFloat(m *machine, op, typ string, x, y uint64) uint64 {
	if typ == "f32" {
		a, b := f32(x), f32(y)
		switch op {
		case "add":
			return b32(a + b)
		case "mul":
			return b32(a * b)
		case "div":
			return b32(a / b)
		}
	} else {
		a, b := f64(x), f64(y)
		switch op {
		case "add":
			return b64(a + b)
		case "mul":
			return b64(a * b)
		case "div":
			return b64(a / b)
		}
	}
	m.t.Fatalf("float op %s.%s", op, typ)
	return 0
}

func (m *machine) cvt(parts, a []string) {
	dst, src := parts[len(parts)-2], parts[len(parts)-1]
	v := m.val(a[1])
	var r uint64
	switch dst + "." + src {
	case "f32.f16":
		r = b32(hw.Float16(v).Float32())
	case "f16.f32":
		r = uint64(hw.Float16FromFloat32(f32(v)))
	case "bf16.f32":
		r = uint64(hw.BFloat16FromFloat32(f32(v)))
	case "s32.s16":
		r = mask(uint64(sext(v, 16)), 32)
	case "s64.s32":
		r = uint64(sext(v, 32))
	default:
		r = mask(v, widthOf(dst))
		if widthOf(src) < widthOf(dst) {
			r = mask(v, widthOf(src))
		}
	}
	m.set(a[0], r)
}

func (m *machine) load(parts, a []string) {
	typ := parts[len(parts)-1]
	w := widthOf(typ) / 8
	if len(parts) == 4 { // ld.global.vN.type
		regs := splitArgs(strings.Trim(a[0], "{}"))
		mem := m.addr(a[1], w*len(regs))
		for i, r := range regs {
			m.set(r, leGet(mem[i*w:], w))
		}
		return
	}
	m.set(a[0], leGet(m.addr(a[1], w), w))
}

func (m *machine) store(parts, a []string) {
	typ := parts[len(parts)-1]
	w := widthOf(typ) / 8
	if len(parts) == 4 {
		regs := splitArgs(strings.Trim(a[1], "{}"))
		mem := m.addr(a[0], w*len(regs))
		for i, r := range regs {
			lePut(mem[i*w:], w, m.val(r))
		}
		return
	}
	lePut(m.addr(a[0], w), w, m.val(a[1]))
}

func leGet(b []byte, w int) uint64 {
	var buf [8]byte
	copy(buf[:], b[:w])
	return binary.LittleEndian.Uint64(buf[:])
}

func lePut(b []byte, w int, v uint64) {
	var buf [8]byte
	binary.LittleEndian.PutUint64(buf[:], v)
	copy(b[:w], buf[:w])
}

// launch runs kernel k over a grid, as cuLaunchKernel would.
func launch(t *testing.T, k *kernelCode, mem []byte, base uint64, args [Params]uint64, blocks, threads int) {
	params := map[string]uint64{}
	for i, p := range k.params {
		params[p] = args[i]
	}
	for b := range blocks {
		for th := range threads {
			m := &machine{t: t, k: k, regs: map[string]uint64{}, params: params, mem: mem, base: base,
				ctaid: uint64(b), ntid: uint64(threads), tid: uint64(th), nctaid: uint64(blocks)}
			m.run()
		}
	}
}

// specials are awkward bit patterns of dt (NaNs, ±Inf, ±0, subnormals,
// extremes) followed by random patterns.
func operandBytes(rng *rand.Rand, dt hw.DType, n int) []byte {
	var pats []uint64
	switch dt {
	case hw.F32:
		pats = []uint64{0, 1 << 31, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00001, 0x7F800001, 1, 0x80000001, 0x007FFFFF, 0x00800000, 0x7F7FFFFF, 0xFF7FFFFF, 0x3F800000, 0xBF800000}
	case hw.F64:
		pats = []uint64{0, 1 << 63, 0x7FF0000000000000, 0xFFF0000000000000, 0x7FF8000000000000, 0xFFF8000000000001, 0x7FF0000000000001, 1, 1<<63 | 1, 0x7FEFFFFFFFFFFFFF, 0x3FF0000000000000}
	case hw.F16:
		pats = []uint64{0, 0x8000, 0x7C00, 0xFC00, 0x7E00, 0xFE01, 0x7C01, 1, 0x8001, 0x3FF, 0x400, 0x7BFF, 0xFBFF, 0x3C00, 0xBC00}
	case hw.BF16:
		pats = []uint64{0, 0x8000, 0x7F80, 0xFF80, 0x7FC0, 0xFFC1, 0x7F81, 1, 0x8001, 0x7F, 0x80, 0x7F7F, 0xFF7F, 0x3F80, 0xBF80}
	case hw.I32:
		pats = []uint64{0, 1, 0xFFFFFFFF, 0x7FFFFFFF, 0x80000000, 0x80000001, 255}
	case hw.I64:
		pats = []uint64{0, 1, math.MaxUint64, math.MaxInt64, 1 << 63, 1<<63 + 1, 255}
	case hw.U8:
		pats = []uint64{0, 1, 127, 128, 254, 255}
	}
	size := dt.Size()
	out := make([]byte, n*size)
	for i := range n {
		v := rng.Uint64()
		if i%3 == 0 {
			v = pats[rng.IntN(len(pats))]
		}
		lePut(out[i*size:], size, v)
	}
	return out
}

// TestInterpretedKernelsMatchContract runs every kernel through the
// interpreter at several alignments (vector path with a head and a tail,
// and all-scalar) and grids (fewer threads than work, so the grid-stride
// loops turn) and compares every bit with hw.ReduceBytes / DivideBytes.
func TestInterpretedKernelsMatchContract(t *testing.T) {
	mod := parseModule(t, Generate())
	for _, k := range Kernels() {
		code := mod[k.Name]
		if code == nil || len(code.params) != Params {
			t.Fatalf("kernel %s not parsed", k.Name)
		}
		if runOne(t, code, k) {
			t.Errorf("%s differs from the contract", k.Name)
		}
	}
}

// runOne runs kernel k on awkward operands at several alignments (vector
// path with a head and a tail, and all-scalar) and grids (fewer threads
// than work, so the grid-stride loops turn), logs the first element that
// differs from hw.ReduceBytes / DivideBytes and reports whether one did.
func runOne(t *testing.T, code *kernelCode, k Kernel) bool {
	rng := rand.New(rand.NewPCG(1, 2))
	const base = 0x100000
	size := k.DType.Size()
	for _, tc := range []struct{ n, doff, soff, blocks, threads int }{
		{97, 0, 0, 2, 5}, {97, 1, 1, 1, 3}, {64, 3, 3, 3, 4}, {50, 0, 1, 1, 7}, {1, 1, 0, 1, 1}, {0, 0, 0, 1, 2},
	} {
		if k.Kind == Divide && tc.doff != tc.soff {
			continue
		}
		// A multiple of 16 bytes, so equal offsets align dst and src alike.
		region := ((tc.n+32)*size + 15) &^ 15
		mem := make([]byte, 2*region)
		copy(mem, operandBytes(rng, k.DType, len(mem)/size))
		dst := uint64(base + tc.doff*size)
		src := uint64(base + region + tc.soff*size)
		divs := []int{0}
		if k.Kind == Divide {
			divs = []int{1, 3, 7, 256, 257, 1 << 31, 1<<31 + 1, math.MaxInt64}
		}
		for _, div := range divs {
			work := append([]byte(nil), mem...)
			head, nvec := Split(dst, src, tc.n, size, k.Kind != Divide)
			args := [Params]uint64{dst, src, Divisor(k.DType, div), uint64(head), uint64(nvec), uint64(tc.n)}
			launch(t, code, work, base, args, tc.blocks, tc.threads)
			want := append([]byte(nil), mem...)
			d := want[dst-base : dst-base+uint64(tc.n*size)]
			s := want[src-base : src-base+uint64(tc.n*size)]
			var err error
			switch k.Kind {
			case Reduce:
				err = hw.ReduceBytes(k.Op, k.DType, d, s)
			case Divide:
				err = hw.DivideBytes(k.DType, d, div)
			case Copy:
				copy(d, s)
			}
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < len(work); i += size {
				if string(work[i:i+size]) != string(want[i:i+size]) {
					t.Logf("%s n=%d offsets %d/%d divisor %d (head %d nvec %d): byte %d: got %x want %x",
						k.Name, tc.n, tc.doff, tc.soff, div, head, nvec, i, work[i:i+size], want[i:i+size])
					return true
				}
			}
		}
	}
	return false
}
