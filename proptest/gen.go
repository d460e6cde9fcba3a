package proptest

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand"
	"reflect"
	"slices"
	"strings"

	"github.com/leanovate/gopter"
	"github.com/leanovate/gopter/gen"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/ops"
)

// GenOptions says what GenSpec and GenCase draw from. A zero field takes
// its value from DefaultGenOptions.
type GenOptions struct {
	// MinRanks and MaxRanks bound the world size (default 1 and 17).
	MinRanks, MaxRanks int
	// Ops are the collectives (default: every op).
	Ops []ops.Op
	// Algos, if set, keeps only these algorithms (of those that implement
	// the op); ops that no listed algorithm implements are dropped.
	Algos []string
	// DTypes and Redops (default: all of them).
	DTypes []hw.DType
	Redops []hw.ReduceOp
	// MaxElems bounds the longer of a rank's input and output buffers, in
	// elements (default 4096): the "large" counts come close to it.
	MaxElems int
	// TopoKinds are the spec kinds GenCase builds fabrics of: "switch",
	// "ring", "mesh", "torus", "cluster" (default: all five).
	TopoKinds []string
}

// DefaultGenOptions is everything: 1 to 17 ranks, every op, algorithm,
// dtype and reduce op, buffers up to 4096 elements, every topology kind.
func DefaultGenOptions() GenOptions {
	return GenOptions{MinRanks: 1, MaxRanks: 17, Ops: ops.Ops(), DTypes: hw.DTypes(), Redops: hw.ReduceOps(),
		MaxElems: 4096, TopoKinds: []string{"switch", "ring", "mesh", "torus", "cluster"}}
}

func (o GenOptions) filled() GenOptions {
	d := DefaultGenOptions()
	o.MinRanks = max(o.MinRanks, 1)
	if o.MaxRanks < o.MinRanks {
		o.MaxRanks = max(d.MaxRanks, o.MinRanks)
	}
	o.Ops, o.DTypes, o.Redops = orAll(o.Ops, d.Ops), orAll(o.DTypes, d.DTypes), orAll(o.Redops, d.Redops)
	o.MaxElems, o.TopoKinds = cond(o.MaxElems < 1, d.MaxElems, o.MaxElems), orAll(o.TopoKinds, d.TopoKinds)
	return o
}

// valid reports whether o names only collectives, dtypes, reduce ops and
// fabric kinds that exist.
func (o GenOptions) valid() bool {
	return !slices.ContainsFunc(o.Ops, func(op ops.Op) bool { return !op.Valid() }) &&
		!slices.ContainsFunc(o.DTypes, func(d hw.DType) bool { return !d.Valid() }) &&
		!slices.ContainsFunc(o.Redops, func(r hw.ReduceOp) bool { return !r.Valid() }) &&
		!slices.ContainsFunc(o.TopoKinds, func(k string) bool { return !slices.Contains(DefaultGenOptions().TopoKinds, k) })
}

// orAll is xs, or all when xs is empty.
func orAll[T any](xs, all []T) []T { return cond(len(xs) == 0, all, xs) }

// allows reports whether a shrunk spec stays within o's ranks and reduce
// ops.
func (o GenOptions) allows(s ops.Spec) bool {
	return s.Ranks >= o.MinRanks && (!s.Op.Reduces() || slices.Contains(o.Redops, s.Redop))
}

// algos lists the algorithms of op that o allows.
func (o GenOptions) algos(op ops.Op) []string {
	all := ops.AlgorithmsFor(op)
	if len(o.Algos) == 0 {
		return all
	}
	return slices.DeleteFunc(all, func(a string) bool { return !slices.Contains(o.Algos, a) })
}

// pick returns a random element of xs.
func pick[T any](rng *rand.Rand, xs []T) T { return xs[rng.Intn(len(xs))] }

// oneOf generates one of xs, shrinking toward the first.
func oneOf[T comparable](xs []T) gopter.Gen {
	if len(xs) == 0 {
		return gen.Fail(reflect.TypeOf(*new(T)))
	}
	return func(gp *gopter.GenParameters) *gopter.GenResult {
		return gopter.NewGenResult(pick(gp.Rng, xs), func(v any) gopter.Shrink {
			if v.(T) == xs[0] {
				return gopter.NoShrink
			}
			return shrinkList([]any{xs[0]})
		})
	}
}

// GenRanks generates world sizes in [lo, hi], shrinking toward lo.
func GenRanks(lo, hi int) gopter.Gen { return gen.IntRange(lo, hi) }

// GenOp generates one of the given collectives (every op if none).
func GenOp(o ...ops.Op) gopter.Gen { return oneOf(orAll(o, ops.Ops())) }

// GenDType generates one of the given dtypes (every dtype if none).
func GenDType(ds ...hw.DType) gopter.Gen { return oneOf(orAll(ds, hw.DTypes())) }

// GenReduceOp generates one of the given reduce ops (all five if none).
func GenReduceOp(rs ...hw.ReduceOp) gopter.Gen { return oneOf(orAll(rs, hw.ReduceOps())) }

// GenAlgorithm generates the name of an algorithm that implements op.
func GenAlgorithm(op ops.Op) gopter.Gen { return oneOf(ops.AlgorithmsFor(op)) }

// GenRoot generates a root rank in [0, ranks), shrinking toward 0.
func GenRoot(ranks int) gopter.Gen { return gen.IntRange(0, max(ranks, 1)-1) }

// smallPrimes are counts that divide by nothing but themselves.
var smallPrimes = []int{2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89, 97, 127, 251, 509, 1021, 2039, 4093}

// blocks is how many Count-sized blocks the longer buffer of op holds.
func blocks(op ops.Op, ranks int) int {
	s := ops.Spec{Op: op, Ranks: ranks, Count: 1}
	in, out := s.BufferLens()
	return max(in, out, 1)
}

// randomCount draws a count for op on ranks ranks whose buffers hold at
// most maxElems elements: 0, 1, a prime, k·p−1, k·p, k·p+1, a small number
// or a large one (a quarter to all of maxElems).
func randomCount(rng *rand.Rand, op ops.Op, ranks, maxElems int) int {
	if op == ops.Barrier {
		return 0
	}
	limit := max(maxElems/blocks(op, ranks), 0)
	var n int
	switch rng.Intn(8) {
	case 0:
		n = 0
	case 1:
		n = 1
	case 2:
		n = pick(rng, smallPrimes)
	case 3, 4:
		n = ranks*(1+rng.Intn(8)) + rng.Intn(3) - 1
	case 5, 6:
		n = rng.Intn(65)
	default:
		n = (maxElems/4 + rng.Intn(maxElems-maxElems/4+1)) / blocks(op, ranks)
	}
	return min(max(n, 0), limit)
}

// GenCount generates element counts for op on a world of ranks ranks:
// 0, 1, primes, just below, at and just above multiples of ranks, small
// ones and large ones, with every buffer at most maxElems elements. It
// shrinks toward 0.
func GenCount(op ops.Op, ranks, maxElems int) gopter.Gen {
	if ranks < 1 || maxElems < 0 {
		return gen.Fail(reflect.TypeOf(0))
	}
	return func(gp *gopter.GenParameters) *gopter.GenResult {
		return gopter.NewGenResult(randomCount(gp.Rng, op, ranks, maxElems), intShrinker)
	}
}

// intShrinker shrinks a non-negative int toward 0: 0, half, one less.
func intShrinker(v any) gopter.Shrink {
	n := v.(int)
	return shrinkList(uniq(n, 0, n/2, n-1))
}

// uniq keeps the values of xs below n, each once, in order.
func uniq(n int, xs ...int) []any {
	var out []any
	for _, x := range xs {
		if x >= 0 && x < n && !slices.Contains(out, any(x)) {
			out = append(out, x)
		}
	}
	return out
}

// shrinkList is a Shrink over fixed values.
func shrinkList(xs []any) gopter.Shrink {
	i := 0
	return func() (any, bool) {
		if i >= len(xs) {
			return nil, false
		}
		i++
		return xs[i-1], true
	}
}

// randomSpec draws a valid Spec (one Compile accepts) from o, or returns
// false when o allows nothing.
func randomSpec(rng *rand.Rand, o GenOptions) (ops.Spec, bool) {
	var opsOK []ops.Op
	for _, op := range o.Ops {
		if len(o.algos(op)) > 0 {
			opsOK = append(opsOK, op)
		}
	}
	if len(opsOK) == 0 {
		return ops.Spec{}, false
	}
	op := pick(rng, opsOK)
	p := o.MinRanks + rng.Intn(o.MaxRanks-o.MinRanks+1)
	s := ops.Spec{Op: op, Algo: pick(rng, o.algos(op)), Ranks: p, DType: pick(rng, o.DTypes),
		Count: randomCount(rng, op, p, o.MaxElems)}
	if op.Rooted() {
		s.Root = rng.Intn(p)
	}
	if op.Reduces() {
		s.Redop = pick(rng, o.Redops)
	}
	if ops.IsNCCL(s.Algo) {
		s = withChannels(rng, s)
	}
	return s, true
}

// withChannels draws channels, a chunk, nodes and a chunk between nodes
// for an NCCL-style plan, so that its results are checked with many
// lanes, many passes and rings or trees that cross nodes, as NCCL runs
// them; s as it was where Compile refuses the draw (PAT with several GPUs
// a node, say).
func withChannels(rng *rand.Rand, s ops.Spec) ops.Spec {
	t := s
	t.Channels = rng.Intn(6)
	chunks := []int{0, 0, 1, 3, 16}
	if s.Count > 256 { // some passes, not thousands
		chunks = []int{0, 0, s.Count / 64, s.Count / 16}
	}
	t.Chunk = pick(rng, chunks)
	// Which of a tree's channels run its first tree and which its second
	// (1 would be the alternation of 0).
	t.TreeChannels = pick(rng, []int{0, 2, 3})
	// and where NCCL's copies of its channels start (0: none).
	t.TreeCopies = pick(rng, [][3]int{{}, {}, {0, 0, 3}, {4, 6, 0}})
	var nodes []int
	for g := 1; g < s.Ranks; g++ {
		if s.Ranks%g == 0 {
			nodes = append(nodes, g)
		}
	}
	if len(nodes) > 0 && rng.Intn(2) == 0 {
		t.NodeRanks = pick(rng, nodes)
		// A chain's messages between nodes, gathered a few pieces at a
		// time (or not, at or under the chunk).
		t.NetChunk = pick(rng, []int{0, t.Chunk, 2 * max(1, t.Chunk), 3*max(1, t.Chunk) + 1})
	}
	if _, err := ops.Compile(t); err != nil {
		return s
	}
	return t
}

// GenSpec generates specs that ops.Compile accepts, drawn from o, an
// NCCL-style algorithm's with channels, a chunk and nodes as well. It
// shrinks toward fewer ranks, a smaller count, root 0, Sum and one
// channel on one node, within o's MinRanks and Redops.
func GenSpec(o GenOptions) gopter.Gen {
	o = o.filled()
	return func(gp *gopter.GenParameters) *gopter.GenResult {
		s, ok := randomSpec(gp.Rng, o)
		if !ok {
			return gopter.NewEmptyResult(reflect.TypeOf(ops.Spec{}))
		}
		return gopter.NewGenResult(s, func(v any) gopter.Shrink {
			var xs []any
			for _, t := range smallerSpecs(v.(ops.Spec)) {
				if o.allows(t) {
					xs = append(xs, t)
				}
			}
			return shrinkList(xs)
		})
	}
}

// smallerSpecs are the valid one-step simplifications of s, most
// aggressive first.
func smallerSpecs(s ops.Spec) []ops.Spec {
	var out []ops.Spec
	with := func(f func(t *ops.Spec)) {
		t := s
		if f(&t); t.Ranks > 0 && t != s && !slices.Contains(out, t) {
			if _, err := ops.Compile(t); err == nil {
				out = append(out, t)
			}
		}
	}
	for _, p := range uniq(s.Ranks, 1, 2, s.Ranks/2, s.Ranks-1) {
		with(func(t *ops.Spec) { t.Ranks, t.Root = p.(int), min(s.Root, p.(int)-1) })
	}
	for _, n := range uniq(s.Count, 0, 1, s.Count/2, s.Count-1) {
		with(func(t *ops.Spec) { t.Count = n.(int) })
	}
	with(func(t *ops.Spec) { t.Root = 0 })
	with(func(t *ops.Spec) {
		t.Channels, t.Chunk, t.NodeRanks, t.NetChunk, t.TreeChannels, t.TreeCopies = 0, 0, 0, 0, 0, [3]int{}
	})
	with(func(t *ops.Spec) { t.NetChunk = 0 })
	with(func(t *ops.Spec) { t.TreeChannels, t.TreeCopies = 0, [3]int{} })
	if s.Op.Reduces() {
		with(func(t *ops.Spec) { t.Redop = hw.Sum })
	}
	return out
}

// GenTopoSpec generates topology spec strings with exactly ranks GPUs, of
// the given kinds (all five if none): switch:N, ring:N, mesh:N,
// torus:AxB[xC] and cluster:MxG (M·G = ranks, with or without rails), with
// random valid bw=, lat=, reduce= and, for clusters, nicbw=, niclat=.
func GenTopoSpec(ranks int, kinds ...string) gopter.Gen {
	if ranks < 1 {
		return gen.Fail(reflect.TypeOf("")) // no fabric has no GPUs
	}
	kinds = orAll(kinds, DefaultGenOptions().TopoKinds)
	return func(gp *gopter.GenParameters) *gopter.GenResult {
		return gopter.NewGenResult(randomTopo(gp.Rng, ranks, kinds), gopter.NoShrinker)
	}
}

// Random link parameters, in the units of the spec syntax.
func randomBW(rng *rand.Rand) string {
	return fmt.Sprintf(pick(rng, []string{"%dGB/s", "%dGb/s", "%dMB/s"}), 1+rng.Intn(999))
}

func randomLat(rng *rand.Rand) string {
	return fmt.Sprintf(pick(rng, []string{"%dns", "%dus", "%dps"}), rng.Intn(5000))
}

// factor2 returns a random a·b = n.
func factor2(rng *rand.Rand, n int) (int, int) {
	var ds []int
	for d := 1; d <= n; d++ {
		if n%d == 0 {
			ds = append(ds, d)
		}
	}
	a := pick(rng, ds)
	return a, n / a
}

func randomTopo(rng *rand.Rand, ranks int, kinds []string) string {
	kind := pick(rng, kinds)
	var head string
	switch kind {
	case "torus":
		a, b := factor2(rng, ranks)
		head = fmt.Sprintf("torus:%dx%d", a, b)
		if b2, c := factor2(rng, b); rng.Intn(2) == 0 {
			head = fmt.Sprintf("torus:%dx%dx%d", a, b2, c)
		}
	case "cluster":
		m, g := factor2(rng, ranks)
		head = fmt.Sprintf("cluster:%dx%d", m, g)
	default:
		head = fmt.Sprintf("%s:%d", kind, ranks)
	}
	var kv []string
	if rng.Intn(2) == 0 {
		kv = append(kv, "bw="+randomBW(rng))
	}
	if rng.Intn(2) == 0 {
		kv = append(kv, "lat="+randomLat(rng))
	}
	if rng.Intn(3) == 0 {
		kv = append(kv, "reduce="+pick(rng, []string{"inf", randomBW(rng)}))
	}
	if kind == "cluster" {
		if rng.Intn(2) == 0 {
			kv = append(kv, "nicbw="+randomBW(rng), "niclat="+randomLat(rng))
		}
		if rng.Intn(2) == 0 {
			kv = append(kv, "rail=true")
		}
	}
	rng.Shuffle(len(kv), func(i, j int) { kv[i], kv[j] = kv[j], kv[i] })
	return strings.Join(append([]string{head}, kv...), ",")
}

// topoFor rewrites topo for a world of ranks GPUs, keeping its kind and
// overrides where the kind allows any size (tori become rings, clusters
// one node).
func topoFor(topo string, ranks int) string {
	head, rest, _ := strings.Cut(topo, ",")
	kind, _, _ := strings.Cut(head, ":")
	switch kind {
	case "torus":
		head = fmt.Sprintf("ring:%d", ranks)
	case "cluster":
		head = fmt.Sprintf("cluster:1x%d", ranks)
	default:
		head = fmt.Sprintf("%s:%d", kind, ranks)
	}
	if rest != "" {
		return head + "," + rest
	}
	return head
}

// GenYAMLGraph generates small random fabrics in the YAML topology format
// (topology.ReadYAML): ranks GPUs among up to eight switches, NICs and
// CPUs, in shuffled order, joined by a random spanning tree plus a few
// extra links, with random bandwidths, latencies and GPU reduce rates. Every
// document is valid and connected.
func GenYAMLGraph(ranks int) gopter.Gen {
	if ranks < 1 {
		return gen.Fail(reflect.TypeOf(""))
	}
	return func(gp *gopter.GenParameters) *gopter.GenResult {
		return gopter.NewGenResult(randomYAML(gp.Rng, ranks), gopter.NoShrinker)
	}
}

func randomYAML(rng *rand.Rand, ranks int) string {
	var names, lines []string
	for i := range ranks {
		names = append(names, fmt.Sprintf("gpu%d", i))
	}
	for i := range rng.Intn(9) {
		names = append(names, fmt.Sprintf("%s%d", pick(rng, []string{"switch", "nic", "cpu"}), i))
	}
	rng.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
	// GPUs must stay in rank order: reassign their names in list order.
	g := 0
	for i, n := range names {
		if strings.HasPrefix(n, "gpu") {
			names[i] = fmt.Sprintf("gpu%d", g)
			g++
		}
	}
	lines = append(lines, fmt.Sprintf("name: random-%d", rng.Intn(1000)), "nodes:")
	for _, n := range names {
		kind := strings.TrimRight(n, "0123456789")
		extra := ""
		if kind == "gpu" && rng.Intn(2) == 0 {
			extra = ", reduce: " + pick(rng, []string{"inf", randomBW(rng)})
		}
		lines = append(lines, fmt.Sprintf("  - {name: %s, kind: %s%s}", n, kind, extra))
	}
	type edge struct{ a, b int }
	var edges []edge
	for i := 1; i < len(names); i++ { // a random spanning tree
		edges = append(edges, edge{rng.Intn(i), i})
	}
	for range rng.Intn(len(names) + 1) {
		a, b := rng.Intn(len(names)), rng.Intn(len(names))
		if a != b && !slices.Contains(edges, edge{a, b}) && !slices.Contains(edges, edge{b, a}) {
			edges = append(edges, edge{a, b})
		}
	}
	if len(edges) > 0 {
		lines = append(lines, "links:")
	}
	for _, e := range edges {
		lines = append(lines, fmt.Sprintf("  - {a: %s, b: %s, bw: %s, lat: %s}", names[e.a], names[e.b], randomBW(rng), randomLat(rng)))
	}
	return strings.Join(lines, "\n") + "\n"
}

// floatFmt describes an IEEE-style binary format.
type floatFmt struct{ ebits, mbits uint }

func floatFormat(dt hw.DType) floatFmt {
	return map[hw.DType]floatFmt{hw.F16: {5, 10}, hw.BF16: {8, 7}, hw.F32: {8, 23}, hw.F64: {11, 52}}[dt]
}

func (f floatFmt) sign() uint64 { return 1 << (f.ebits + f.mbits) }
func (f floatFmt) inf() uint64  { return (1<<f.ebits - 1) << f.mbits }
func (f floatFmt) mant() uint64 { return 1<<f.mbits - 1 }
func (f floatFmt) one() uint64  { return (1<<(f.ebits-1) - 1) << f.mbits }

// canonicalNaN is the quiet NaN that arithmetic stores (hw rule 3).
func (f floatFmt) canonicalNaN() uint64 { return f.inf() | 1<<(f.mbits-1) }

// specialBits are the awkward element bit patterns of dt.
func specialBits(dt hw.DType) []uint64 {
	switch dt {
	case hw.I32:
		return []uint64{0, 1, 0xFFFFFFFF, math.MaxInt32, 1 << 31, 1<<31 + 1, math.MaxInt32 - 1, 255, 256, 0xFFFF}
	case hw.I64:
		return []uint64{0, 1, math.MaxUint64, math.MaxInt64, 1 << 63, 1<<63 + 1, 1<<53 + 1, -(1<<53 + 1) & math.MaxUint64,
			math.MaxInt32, 0xFFFFFFFF80000000, 255}
	case hw.U8:
		return []uint64{0, 1, 127, 128, 254, 255}
	}
	f := floatFormat(dt)
	s, inf, m := f.sign(), f.inf(), f.mant()
	maxFinite := inf - 1<<f.mbits | m
	return []uint64{0, s, inf, s | inf, f.canonicalNaN(), s | f.canonicalNaN() | 1, inf | 1, // NaNs: quiet, negative with payload, signalling
		1, s | 1, m, s | m, 1 << f.mbits, s | 1<<f.mbits, // subnormals and the smallest normal
		maxFinite, s | maxFinite, f.one(), s | f.one()}
}

// Specials returns the awkward values of dt, encoded one element after
// another: for floats ±0, ±Inf, quiet, negative and signalling NaNs, the
// smallest and largest subnormals, the smallest normal, ±max and ±1 (bit
// patterns of the dtype itself, so f16 and bf16 subnormals are theirs);
// for integers 0, ±1 and the extremes (MinInt32, MaxInt32, 255, 2^53+1 …).
func Specials(dt hw.DType) []byte {
	var out []byte
	for _, b := range specialBits(dt) {
		out = appendElem(out, dt, b)
	}
	return out
}

// appendElem appends the low dt.Size() bytes of bits, little-endian.
func appendElem(dst []byte, dt hw.DType, bits uint64) []byte {
	var buf [8]byte
	binary.LittleEndian.PutUint64(buf[:], bits)
	return append(dst, buf[:dt.Size()]...)
}

// valueGen draws elements of one dtype for one case: a share rate of
// awkward values, the rest ordinary ones (near 1 when nearOne, so long
// products neither overflow nor underflow).
type valueGen struct {
	dt      hw.DType
	rate    float64
	nearOne bool
}

func newValueGen(rng *rand.Rand, dt hw.DType, nearOne bool) valueGen {
	rates := []float64{0, 0, 0, 0, 1.0 / 32, 1.0 / 32, 1.0 / 32, 0.25, 0.25, 1}
	return valueGen{dt: dt, rate: pick(rng, rates), nearOne: nearOne}
}

func (g valueGen) next(rng *rand.Rand) uint64 {
	if rng.Float64() < g.rate {
		if g.dt.IsFloat() && rng.Intn(4) == 0 { // a random NaN or subnormal
			f := floatFormat(g.dt)
			m := 1 + uint64(rng.Int63n(int64(f.mant())))
			if rng.Intn(2) == 0 {
				m |= f.inf()
			}
			return m | f.sign()*uint64(rng.Intn(2))
		}
		return pick(rng, specialBits(g.dt))
	}
	switch {
	case g.dt == hw.U8:
		return uint64(rng.Intn(256))
	case !g.dt.IsFloat() && rng.Intn(2) == 0:
		return uint64(rng.Int63n(201)-100) & math.MaxUint64
	case !g.dt.IsFloat():
		return rng.Uint64()
	case g.nearOne:
		raw, _ := hw.FromFloat64s(g.dt, []float64{1 + (2*rng.Float64()-1)/8})
		v := leBits(raw)
		if rng.Intn(4) == 0 {
			v |= floatFormat(g.dt).sign()
		}
		return v
	}
	f := floatFormat(g.dt) // exponents 2^-8 .. 2^4: sums of 17 stay finite in f16
	e := uint64(1<<(f.ebits-1)-1-8) + uint64(rng.Intn(13))
	return f.sign()*uint64(rng.Intn(2)) | e<<f.mbits | rng.Uint64()&f.mant()
}

func (g valueGen) fill(rng *rand.Rand, n int) []byte {
	out := make([]byte, 0, n*g.dt.Size())
	for range n {
		out = appendElem(out, g.dt, g.next(rng))
	}
	return out
}

// GenElements generates n encoded elements of dt, a random share of them
// awkward (see Specials; also random NaN payloads and subnormals), the
// rest ordinary values. It shrinks toward zeros.
func GenElements(dt hw.DType, n int) gopter.Gen {
	if n < 0 || !dt.Valid() || n > math.MaxInt32/dt.Size() {
		return gen.Fail(reflect.TypeOf([]byte(nil)))
	}
	return func(gp *gopter.GenParameters) *gopter.GenResult {
		b := newValueGen(gp.Rng, dt, false).fill(gp.Rng, n)
		return gopter.NewGenResult(b, func(v any) gopter.Shrink {
			b := v.([]byte)
			if !slices.ContainsFunc(b, func(x byte) bool { return x != 0 }) {
				return gopter.NoShrink
			}
			return shrinkList([]any{make([]byte, len(b))})
		})
	}
}

// inputsFor draws every rank's input for s.
func inputsFor(rng *rand.Rand, s ops.Spec) [][]byte {
	in, _ := s.BufferLens()
	g := newValueGen(rng, s.DType, s.Op.Reduces() && s.Redop == hw.Prod)
	out := make([][]byte, s.Ranks)
	for r := range out {
		out[r] = g.fill(rng, in)
	}
	return out
}

// GenCase generates whole cases from o: a spec GenSpec would give, a
// fabric GenTopoSpec would give for its ranks, and inputs GenElements
// would give (near 1 for products). It shrinks with ShrinkCase, keeping
// to o's MinRanks and Redops.
func GenCase(o GenOptions) gopter.Gen {
	o = o.filled()
	if !o.valid() {
		return gen.Fail(reflect.TypeOf(Case{})) // generates nothing rather than invalid cases
	}
	return func(gp *gopter.GenParameters) *gopter.GenResult {
		s, ok := randomSpec(gp.Rng, o)
		if !ok {
			return gopter.NewEmptyResult(reflect.TypeOf(Case{}))
		}
		c := Case{Spec: s, Topo: randomTopo(gp.Rng, s.Ranks, o.TopoKinds), Inputs: inputsFor(gp.Rng, s)}
		return gopter.NewGenResult(c, func(v any) gopter.Shrink {
			return ShrinkCase(v).Filter(func(v any) bool { return o.allows(v.(Case).Spec) })
		})
	}
}

// ShrinkCase is the shrinker of GenCase, usable with any generator of
// Cases: it tries, in order, fewer ranks (1, 2, half, one less), a smaller
// count (0, 1, half, one less), root 0, Sum, a plain switch fabric, and
// simpler inputs (all zero, one rank zero, half of each rank zero, each
// non-finite float 1, then single elements 0 or 1), keeping each rank's
// remaining values in place.
func ShrinkCase(v any) gopter.Shrink {
	c, ok := v.(Case)
	if !ok {
		return gopter.NoShrink
	}
	var next []func() (Case, bool)
	for _, t := range smallerSpecs(c.Spec) {
		next = append(next, func() (Case, bool) { return reshape(c, t, 0), true })
		if t.Ranks == c.Spec.Ranks && t.Count > 0 { // the same count from the end of each block
			next = append(next, func() (Case, bool) { return reshape(c, t, c.Spec.Count-t.Count), true })
		}
	}
	if plain := fmt.Sprintf("switch:%d", c.Spec.Ranks); c.Topo != plain {
		next = append(next, func() (Case, bool) { d := c; d.Topo = plain; return d, true })
	}
	size := max(c.Spec.DType.Size(), 1)
	in, _ := c.Spec.BufferLens()
	edit := func(keep func(r, i int, e []byte) []byte) func() (Case, bool) {
		return func() (Case, bool) {
			d, changed := c, false
			d.Inputs = make([][]byte, len(c.Inputs))
			for r, b := range c.Inputs {
				d.Inputs[r] = make([]byte, 0, len(b))
				for i := 0; i+size <= len(b); i += size {
					e := keep(r, i/size, b[i:i+size])
					changed = changed || string(e) != string(b[i:i+size])
					d.Inputs[r] = append(d.Inputs[r], e...)
				}
			}
			return d, changed
		}
	}
	zero := make([]byte, size)
	next = append(next, edit(func(int, int, []byte) []byte { return zero }))
	for q := range c.Spec.Ranks {
		next = append(next, edit(func(r, _ int, e []byte) []byte { return cond(r == q, zero, e) }))
	}
	next = append(next,
		edit(func(_, i int, e []byte) []byte { return cond(i >= in/2, zero, e) }),
		edit(func(_, i int, e []byte) []byte { return cond(i < in/2, zero, e) }))
	one := appendElem(nil, c.Spec.DType, 1)
	if c.Spec.DType.IsFloat() {
		f := floatFormat(c.Spec.DType)
		one = appendElem(nil, c.Spec.DType, f.one())
		next = append(next, edit(func(_, _ int, e []byte) []byte {
			return cond(leBits(e)&f.inf() == f.inf(), one, e)
		}))
	}
	if in <= 8 {
		for q := range c.Spec.Ranks {
			for j := range in {
				for _, v := range [][]byte{zero, one} {
					next = append(next, edit(func(r, i int, e []byte) []byte {
						return cond(r == q && i == j && leBits(e) != 0, v, e)
					}))
				}
			}
		}
	}
	return func() (any, bool) {
		for len(next) > 0 {
			d, ok := next[0]()
			next = next[1:]
			if ok {
				return d, true
			}
		}
		return nil, false
	}
}

func cond[T any](c bool, a, b T) T {
	if c {
		return a
	}
	return b
}

// inBlocks is how many Count-sized blocks a rank's input holds.
func inBlocks(s ops.Spec) int {
	if s.Count == 0 {
		return 0
	}
	in, _ := s.BufferLens()
	return in / s.Count
}

// reshape turns c into a case of the smaller spec t: ranks and input
// blocks beyond t's are dropped, each block cut to its t.Count elements
// from the from-th on, and the fabric resized.
func reshape(c Case, t ops.Spec, from int) Case {
	size := t.DType.Size()
	d := Case{Spec: t, Topo: c.Topo, Inputs: make([][]byte, t.Ranks)}
	if t.Ranks != c.Spec.Ranks {
		d.Topo = topoFor(c.Topo, t.Ranks)
	}
	keep := min(t.Count, c.Spec.Count-from) * size
	for r := range t.Ranks {
		d.Inputs[r] = []byte{}
		for b := range inBlocks(t) {
			off := (b*c.Spec.Count + from) * size
			d.Inputs[r] = append(d.Inputs[r], c.Inputs[r][off:off+keep]...)
		}
	}
	return d
}

// leBits reads one little-endian element of up to 8 bytes, zero-extended.
func leBits(b []byte) uint64 {
	var buf [8]byte
	copy(buf[:], b)
	return binary.LittleEndian.Uint64(buf[:])
}
