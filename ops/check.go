package ops

import (
	"fmt"
	"slices"
	"strings"
)

// Check proves, without running it on any device, that a plan is correct.
// It executes the plan symbolically twice, out of place and in place
// (NCCL's aliasing, see Plan.InPlaceOffset), with every element of every
// input a distinct symbol, and verifies that:
//
//   - every step is well formed: ranges inside their buffers, peers in
//     range, After lists pointing backwards;
//   - every send is received, with the same length, and no receive is left
//     waiting: the plan cannot deadlock (sends are eager, as in hw, or
//     wait for room in their buffer on the peer when the plan's Wire
//     has Slots);
//   - out of place, no rank writes its input;
//   - no two lanes of a rank touch the same element without an ordering
//     between them (After), and nothing reads an element never written;
//   - no two ranks touch the same element unless both only read it. Only
//     switch steps (StepSwitchReduce, StepMulticast) reach another rank's
//     memory, and they act there as their issuer: the elements a switch
//     step reads or writes on a member must be touched by no step of any
//     other rank (the member's own, or another issuer's) unless every
//     such step only reads them, while the issuer's own steps are ordered
//     by its lanes as usual. Check does not follow the order messages
//     give between ranks, so this refuses some plans that a barrier of
//     messages would make safe; it is what NCCL's NVLS plans need: each
//     rank alone reduces from and multicasts into its shard of every
//     member, and in place, where In is Out, the shard it reads is the
//     one it later writes. Inputs count as ready on every rank before
//     any step, and outputs are compared after every rank has finished
//     (see UsesSwitch);
//   - every output element holds exactly the contributions it must: each
//     rank's element once for a reduction (divided once for avg), the right
//     rank's element for a copy;
//   - after allreduce every rank holds the same reduction tree, so results
//     are bit-identical across ranks (trees are compared up to the order of
//     a single combine's two operands, which every reduce op ignores bit
//     for bit; the grouping is what matters);
//   - after a barrier every rank has heard, through messages, from every
//     other rank.
//
// The cost is proportional to the plan's steps times their lengths, and
// its memory to the ranks times their buffers' elements (refused with
// ErrTooLarge past MaxCheckElements), so check small counts. A streamed
// plan is read lane by lane, as it runs.
func Check(p *Plan) error {
	if p == nil {
		return fmt.Errorf("ops: check: %w: nil plan", ErrBadPlan)
	}
	if p.native {
		return fmt.Errorf("ops: check %v: %w", p.Spec, errNativePlan)
	}
	if err := checkShape(p); err != nil {
		return fmt.Errorf("ops: check %v: %w", p.Spec, err)
	}
	// In float64, which cannot wrap: a plan's lengths may each be near
	// the largest int.
	elems := float64(p.InLen) + float64(p.OutLen) + float64(p.TmpLen)
	if n := float64(p.Ranks) * elems; n > MaxCheckElements {
		return fmt.Errorf("ops: check %v: %w: %d ranks × %.0f buffer elements is %.0f symbolic elements, over the limit of %d; check a smaller count",
			p.Spec, ErrTooLarge, p.Ranks, elems, n, MaxCheckElements)
	}
	// Each element keeps its last reader on every lane, and each lane
	// what it has seen of every other.
	if n := float64(p.Ranks) * float64(p.Lanes) * (elems + float64(p.Lanes)); n > maxCheckLaneWords {
		return fmt.Errorf("ops: check %v: %w: %d ranks × %d lanes × (%.0f elements + %d lanes) is %.0f words of lane clocks, over the limit of %d; check fewer channels or a smaller count",
			p.Spec, ErrTooLarge, p.Ranks, p.Lanes, elems, p.Lanes, n, maxCheckLaneWords)
	}
	for _, inPlace := range []bool{false, true} {
		if err := newSymRun(p, inPlace).run(); err != nil {
			mode := "out of place"
			if inPlace {
				mode = "in place"
			}
			if p.validate() != nil {
				// A plan Run refuses as malformed (sends and receives
				// that do not pair up) is refused as that here too, with
				// the symbolic run's account of it.
				return fmt.Errorf("ops: check %v, %s: %w: %w", p.Spec, mode, ErrBadPlan, err)
			}
			return fmt.Errorf("ops: check %v, %s: %w", p.Spec, mode, err)
		}
	}
	return nil
}

// MaxCheckElements bounds the elements Check follows, every rank's
// buffers together: each takes about 50 bytes.
const MaxCheckElements = 1 << 22

// maxCheckLaneWords bounds the lane clocks Check keeps (4 bytes a word):
// MaxCheckElements elements on 64 lanes, a GiB.
const maxCheckLaneWords = MaxCheckElements * 64

// sym is an interned symbolic value: 0 is "never written".
type sym int32

type symKind uint8

const (
	symUndef   symKind = iota
	symLeaf            // a: rank, b: element of its input
	symCombine         // a <= b: the two operands, order-free
	symDivide          // a: the operand
)

type symNode struct {
	kind symKind
	a, b int32
}

// symTable interns symbolic values, so equal trees have equal ids.
type symTable struct {
	nodes  []symNode
	index  map[symNode]sym
	leaves map[sym][]sym // sorted leaf multiset, memoised
}

func newSymTable() *symTable {
	return &symTable{nodes: []symNode{{}}, index: map[symNode]sym{{}: 0}, leaves: map[sym][]sym{}}
}

func (t *symTable) intern(n symNode) sym {
	if id, ok := t.index[n]; ok {
		return id
	}
	id := sym(len(t.nodes))
	t.nodes = append(t.nodes, n)
	t.index[n] = id
	return id
}

func (t *symTable) leaf(rank, elem int) sym {
	return t.intern(symNode{kind: symLeaf, a: int32(rank), b: int32(elem)})
}

func (t *symTable) combine(x, y sym) sym {
	if x > y {
		x, y = y, x
	}
	return t.intern(symNode{kind: symCombine, a: int32(x), b: int32(y)})
}

// leavesOf returns the sorted multiset of leaves under s.
func (t *symTable) leavesOf(s sym) []sym {
	if l, ok := t.leaves[s]; ok {
		return l
	}
	var out []sym
	switch n := t.nodes[s]; n.kind {
	case symLeaf:
		out = []sym{s}
	case symCombine:
		out = append(slices.Clone(t.leavesOf(sym(n.a))), t.leavesOf(sym(n.b))...)
		slices.Sort(out)
	case symDivide:
		out = t.leavesOf(sym(n.a))
	}
	t.leaves[s] = out
	return out
}

// describe prints a symbolic value for error messages.
func (t *symTable) describe(s sym) string {
	n := t.nodes[s]
	switch n.kind {
	case symUndef:
		return "(never written)"
	case symLeaf:
		return fmt.Sprintf("x%d[%d]", n.a, n.b)
	case symCombine:
		return "(" + t.describe(sym(n.a)) + " + " + t.describe(sym(n.b)) + ")"
	case symDivide:
		return t.describe(sym(n.a)) + "/p"
	}
	return "?"
}

// access remembers, per element, the last step that wrote it and the last
// step of each lane that read it, to find unordered accesses, and whose
// steps they were: the element's rank's own, or, for a switch step, its
// issuer's.
type access struct {
	writer  int32 // step index, -1 for none
	wlane   int32
	wrank   int32   // the rank whose step wrote it
	readers []int32 // per lane of rank rrank, -1 for none
	rrank   int32   // the rank whose steps read it: noRank, or manyRanks
}

// access.rrank when no step has read the element, and when steps of
// several ranks have.
const (
	noRank    = -1
	manyRanks = -2
)

type symMsg struct {
	vals  []sym
	heard []bool // ranks the sender had heard from (barrier check)
	conn  connKey
	held  int64 // bytes it holds in conn's buffer until received
}

type msgKey struct {
	from, to int
	tag      uint32
}

// connKey is a lane's connection to a peer: what Wire.Slots bound.
type connKey struct{ from, to, lane int }

// symRun is one symbolic execution of a plan.
type symRun struct {
	p       *Plan
	inPlace bool
	t       *symTable
	arrays  [][3][]sym    // per rank: backing arrays of In, Out, Tmp
	bases   [][3]int      // per rank: offset of each Buf in its array
	alias   [][3]int      // per rank: which array each Buf uses
	acc     [][3][]access // per rank, per array
	lanes   [][]laneReader
	// A step's vector clock holds, per lane of its rank, the last step
	// of that lane known to have finished before it. laneClock is the
	// clock of each lane's latest step, markClock that of each step
	// other lanes await, by its mark.
	laneClock [][][]int32
	markClock []map[int][]int32
	heard     [][]bool
	mail      map[msgKey][]symMsg
	held      map[connKey]int64 // bytes held in buffers, when the Wire has Slots
	nets      netMeetings[netRun]
}

// netMeetings pairs a plan's network steps (IsNet) into the collectives
// they make, of type M: the k-th step of a tag on each member of a
// network group with the k-th on the others.
type netMeetings[M any] struct {
	runs map[netKey][]*M    // by group and tag, in the order their members meet them
	seq  map[netRankKey]int // how many of a tag each rank has finished
}

// netKey names a network group's collectives of one tag: the group by
// its first member.
type netKey struct {
	first int
	tag   uint32
}

type netRankKey struct {
	rank int
	tag  uint32
}

// at is the collective that rank r's next step of tag joins, in the
// group whose first member is first; fresh makes it for the first to
// come.
func (m *netMeetings[M]) at(first, r int, tag uint32, fresh func() *M) *M {
	if m.runs == nil {
		m.runs, m.seq = map[netKey][]*M{}, map[netRankKey]int{}
	}
	seq, k := m.seq[netRankKey{r, tag}], netKey{first, tag}
	for len(m.runs[k]) <= seq {
		m.runs[k] = append(m.runs[k], fresh())
	}
	return m.runs[k][seq]
}

// leave records that rank r has finished its collective of tag.
func (m *netMeetings[M]) leave(r int, tag uint32) { m.seq[netRankKey{r, tag}]++ }

// netRun is one network collective: the step each member has reached
// (nil until it does), and whether the switch has run it.
type netRun struct {
	steps   []*Operation
	arrived int
	done    bool
}

func newSymRun(p *Plan, inPlace bool) *symRun {
	s := &symRun{p: p, inPlace: inPlace, t: newSymTable(), mail: map[msgKey][]symMsg{}, held: map[connKey]int64{}}
	n := p.Ranks
	s.arrays = make([][3][]sym, n)
	s.bases = make([][3]int, n)
	s.alias = make([][3]int, n)
	s.acc = make([][3][]access, n)
	s.laneClock = make([][][]int32, n)
	s.markClock = make([]map[int][]int32, n)
	s.heard = make([][]bool, n)
	for r := range n {
		s.alias[r] = [3]int{0, 1, 2}
		lens := [3]int{p.InLen, p.OutLen, p.TmpLen}
		if inPlace {
			switch {
			case p.OutInIn():
				s.alias[r][Out] = int(In)
				s.bases[r][Out] = r * p.Count
				lens[Out] = 0
			default:
				s.alias[r][In] = int(Out)
				s.bases[r][In] = p.InPlaceOffset(r)
				lens[In] = 0
			}
		}
		for a := range 3 {
			s.arrays[r][a] = make([]sym, lens[a])
			s.acc[r][a] = make([]access, lens[a])
			for i := range s.acc[r][a] {
				s.acc[r][a][i] = access{writer: -1, wrank: noRank, rrank: noRank, readers: slices.Repeat([]int32{-1}, p.Lanes)}
			}
		}
		// Inputs are leaves, wherever In lives.
		for i := range p.InLen {
			arr, off := s.loc(r, Ref{Buf: In, Off: i, Len: 1})
			arr[off] = s.t.leaf(r, i)
		}
		s.laneClock[r] = make([][]int32, p.Lanes)
		for l := range p.Lanes {
			s.laneClock[r][l] = slices.Repeat([]int32{-1}, p.Lanes)
		}
		s.heard[r] = make([]bool, n)
		s.heard[r][r] = true
	}
	return s
}

// loc resolves a ref of rank r to its backing array and offset.
func (s *symRun) loc(r int, ref Ref) ([]sym, int) {
	a := s.alias[r][ref.Buf]
	return s.arrays[r][a], s.bases[r][ref.Buf] + ref.Off
}

func (s *symRun) run() error {
	p := s.p
	s.lanes = make([][]laneReader, p.Ranks)
	defer func() {
		for _, ls := range s.lanes {
			for _, l := range ls {
				l.close()
			}
		}
	}()
	for r := range p.Ranks {
		cursors, err := p.Cursors(r)
		if err != nil {
			return err
		}
		s.lanes[r] = newLaneReaders(cursors)
	}
	for progress := true; progress; {
		progress = false
		for r := range p.Ranks {
			for l := range p.Lanes {
				lane := &s.lanes[r][l]
				for op := lane.peek(); op != nil; op = lane.peek() {
					ran, err := s.try(r, op)
					if err != nil {
						return err
					}
					if !ran {
						break
					}
					progress = true
					lane.advance()
				}
			}
		}
	}
	var blocked []string
	for r := range p.Ranks {
		for l := range p.Lanes {
			if op := s.lanes[r][l].peek(); op != nil {
				why := ""
				if _, full := s.bufferFull(r, op); full {
					why = fmt.Sprintf(", waiting for room in its buffer: %d of %d bytes held", s.held[connKey{r, op.Peer, l}], p.Wire.buffer())
				}
				blocked = append(blocked, fmt.Sprintf("rank %d lane %d at step %d (%v)%s", r, l, op.Index, op, why))
			}
		}
	}
	if len(blocked) > 0 {
		return fmt.Errorf("deadlock: %s", strings.Join(blocked, "; "))
	}
	var keys []msgKey
	for k, q := range s.mail {
		if len(q) > 0 {
			keys = append(keys, k)
		}
	}
	if len(keys) > 0 {
		slices.SortFunc(keys, func(a, b msgKey) int {
			return cmpInts(a.from, b.from, a.to, b.to, int(a.tag), int(b.tag))
		})
		k := keys[0]
		return fmt.Errorf("%d send(s) never received, first from rank %d to rank %d tag %d", len(keys), k.from, k.to, k.tag)
	}
	return s.verify()
}

func cmpInts(pairs ...int) int {
	for i := 0; i+1 < len(pairs); i += 2 {
		if c := pairs[i] - pairs[i+1]; c != 0 {
			return c
		}
	}
	return 0
}

// where names op of rank r in errors: its lane only when the plan has
// several.
func (s *symRun) where(r int, op *Operation) string {
	if s.p.Lanes == 1 {
		return fmt.Sprintf("rank %d step %d (%v)", r, op.Index, op)
	}
	return fmt.Sprintf("rank %d lane %d step %d (%v)", r, op.Lane, op.Index, op)
}

// bufferFull is the bytes send st of rank r holds in its buffer under
// the plan's Wire (0 without Slots), and whether its lane's buffer on
// the peer has too little room for it now.
func (s *symRun) bufferFull(r int, st *Operation) (need int64, full bool) {
	w := s.p.Wire
	if st.Kind != StepSend || w == nil || w.Slots == 0 {
		return 0, false
	}
	need = w.holds(int64(st.Src.Len) * int64(s.p.DType.Size()))
	return need, s.held[connKey{r, st.Peer, st.Lane}]+need > w.buffer()
}

// clock is step st of rank r's vector clock: what is known to have
// finished before it.
func (s *symRun) clock(r int, st *Operation) []int32 {
	vc := slices.Clone(s.laneClock[r][st.Lane])
	for _, a := range st.Awaits {
		copyMax(vc, s.markClock[r][a])
	}
	vc[st.Lane] = int32(st.Index)
	return vc
}

// try runs op of rank r if it can run now.
func (s *symRun) try(r int, st *Operation) (bool, error) {
	for _, a := range st.Awaits {
		if _, ok := s.markClock[r][a]; !ok {
			return false, nil
		}
	}
	fail := func(format string, args ...any) (bool, error) {
		return false, fmt.Errorf("%s: %s", s.where(r, st), fmt.Sprintf(format, args...))
	}
	vc := s.clock(r, st)

	switch st.Kind {
	case StepSend:
		need, full := s.bufferFull(r, st)
		if full {
			return false, nil // until the peer receives enough
		}
		vals, err := s.read(r, r, st, vc, st.Src)
		if err != nil {
			return fail("%v", err)
		}
		conn := connKey{r, st.Peer, st.Lane}
		if need > 0 {
			s.held[conn] += need
		}
		k := msgKey{r, st.Peer, st.Tag}
		s.mail[k] = append(s.mail[k], symMsg{vals: vals, heard: slices.Clone(s.heard[r]), conn: conn, held: need})
	case StepRecv:
		k := msgKey{st.Peer, r, st.Tag}
		q := s.mail[k]
		if len(q) == 0 {
			return false, nil
		}
		m := q[0]
		s.mail[k] = q[1:]
		if m.held > 0 {
			s.held[m.conn] -= m.held
		}
		if len(m.vals) != st.Dst.Len {
			return fail("message from rank %d has %d elements, receive buffer %d", st.Peer, len(m.vals), st.Dst.Len)
		}
		for j, h := range m.heard {
			s.heard[r][j] = s.heard[r][j] || h
		}
		if err := s.write(r, r, st, vc, st.Dst, m.vals); err != nil {
			return fail("%v", err)
		}
	case StepCopy:
		vals, err := s.read(r, r, st, vc, st.Src)
		if err != nil {
			return fail("%v", err)
		}
		if err := s.write(r, r, st, vc, st.Dst, vals); err != nil {
			return fail("%v", err)
		}
	case StepReduce:
		src, err := s.read(r, r, st, vc, st.Src)
		if err != nil {
			return fail("%v", err)
		}
		dst, err := s.read(r, r, st, vc, st.Dst)
		if err != nil {
			return fail("%v", err)
		}
		for j := range dst {
			dst[j] = s.t.combine(dst[j], src[j])
		}
		if err := s.write(r, r, st, vc, st.Dst, dst); err != nil {
			return fail("%v", err)
		}
	case StepDivide:
		vals, err := s.read(r, r, st, vc, st.Dst)
		if err != nil {
			return fail("%v", err)
		}
		for j := range vals {
			vals[j] = s.t.intern(symNode{kind: symDivide, a: int32(vals[j])})
		}
		if err := s.write(r, r, st, vc, st.Dst, vals); err != nil {
			return fail("%v", err)
		}
	case StepSwitchReduce:
		// The switch combines the members' elements in member order.
		first, n := s.p.Group(r)
		var acc []sym
		for q := first; q < first+n; q++ {
			vals, err := s.read(q, r, st, vc, st.Src)
			if err != nil {
				return fail("on member rank %d: %v", q, err)
			}
			if acc == nil {
				acc = vals
				continue
			}
			for j := range acc {
				acc[j] = s.t.combine(acc[j], vals[j])
			}
		}
		if err := s.write(r, r, st, vc, st.Dst, acc); err != nil {
			return fail("%v", err)
		}
	case StepMulticast:
		vals, err := s.read(r, r, st, vc, st.Src)
		if err != nil {
			return fail("%v", err)
		}
		first, n := s.p.Group(r)
		for q := first; q < first+n; q++ {
			if err := s.write(q, r, st, vc, st.Dst, vals); err != nil {
				return fail("on member rank %d: %v", q, err)
			}
		}
	case StepNetAllReduce, StepNetAllGather, StepNetReduceScatter:
		ran, err := s.netCollective(r, st)
		if err != nil || !ran {
			return ran, err
		}
	}
	s.laneClock[r][st.Lane] = vc
	if st.Signals {
		if s.markClock[r] == nil {
			s.markClock[r] = map[int][]int32{}
		}
		s.markClock[r][st.Mark] = vc
	}
	return true, nil
}

// netCollective runs rank r's network step st (IsNet) once every member
// of its group has reached its own: the switch reads each member's Src
// as that member's step, combines or gathers them in member order, and
// writes each member's Dst. A member reached by another's call has
// finished when its own call comes.
func (s *symRun) netCollective(r int, st *Operation) (bool, error) {
	first, stride, n := s.p.NetGroup(r)
	run := s.nets.at(first, r, st.Tag, func() *netRun { return &netRun{steps: make([]*Operation, n)} })
	if !run.done {
		me := (r - first) / stride
		if run.steps[me] == nil {
			run.steps[me] = st
			run.arrived++
		}
		if run.arrived < n {
			return false, nil
		}
		srcs := make([][]sym, n)
		for i, m := range run.steps {
			q := first + i*stride
			if m.Kind != st.Kind || m.Src.Len != st.Src.Len || m.Dst.Len != st.Dst.Len {
				return false, fmt.Errorf("%s: member rank %d's step %d (%v) does not match its kind and lengths", s.where(r, st), q, m.Index, m)
			}
			vals, err := s.read(q, q, m, s.clock(q, m), m.Src)
			if err != nil {
				return false, fmt.Errorf("%s: %v", s.where(q, m), err)
			}
			srcs[i] = vals
		}
		// reduce combines the members' elements lo..hi in member order.
		reduce := func(lo, hi int) []sym {
			acc := slices.Clone(srcs[0][lo:hi])
			for _, vals := range srcs[1:] {
				for j := range acc {
					acc[j] = s.t.combine(acc[j], vals[lo+j])
				}
			}
			return acc
		}
		for i, m := range run.steps {
			var out []sym
			switch st.Kind {
			case StepNetAllReduce:
				out = reduce(0, m.Src.Len)
			case StepNetAllGather:
				out = slices.Concat(srcs...)
			case StepNetReduceScatter:
				out = reduce(i*m.Dst.Len, (i+1)*m.Dst.Len)
			}
			q := first + i*stride
			if err := s.write(q, q, m, s.clock(q, m), m.Dst, out); err != nil {
				return false, fmt.Errorf("%s: %v", s.where(q, m), err)
			}
		}
		run.done = true
	}
	s.nets.leave(r, st.Tag)
	return true, nil
}

func copyMax(dst, src []int32) {
	for i := range dst {
		dst[i] = max(dst[i], src[i])
	}
}

// ordered reports whether step (lane, idx) is known to precede a step with
// vector clock vc.
func ordered(vc []int32, lane, idx int32) bool { return idx < 0 || vc[lane] >= idx }

// read reads ref of rank owner for step st of rank actor, whose vector
// clock is vc: the owner itself, or a switch step's issuer reaching a
// member.
func (s *symRun) read(owner, actor int, st *Operation, vc []int32, ref Ref) ([]sym, error) {
	arr, off := s.loc(owner, ref)
	accs := s.acc[owner][s.alias[owner][ref.Buf]]
	out := make([]sym, ref.Len)
	lane, i := int32(st.Lane), st.Index
	for j := range ref.Len {
		a := &accs[off+j]
		if a.writer >= 0 && a.wrank != int32(actor) {
			return nil, crossRank("reads", ref, j, "wrote", a.wrank, a.writer, a.wlane)
		}
		if !ordered(vc, a.wlane, a.writer) {
			return nil, fmt.Errorf("reads %s[%d] while step %d on lane %d may still write it (no After orders them)", ref.Buf, ref.Off+j, a.writer, a.wlane)
		}
		if arr[off+j] == 0 {
			return nil, fmt.Errorf("reads %s[%d], which nothing has written", ref.Buf, ref.Off+j)
		}
		out[j] = arr[off+j]
		switch a.rrank {
		case noRank:
			a.rrank = int32(actor)
		case int32(actor), manyRanks:
		default:
			a.rrank = manyRanks
		}
		a.readers[lane] = int32(i)
	}
	return out, nil
}

// write writes vals to ref of rank owner for step st of rank actor, as
// read reads.
func (s *symRun) write(owner, actor int, st *Operation, vc []int32, ref Ref, vals []sym) error {
	if ref.Buf == In && !s.inPlace && ref.Len > 0 {
		return fmt.Errorf("writes its input %v; out of place the caller's input must be left as it was", ref)
	}
	arr, off := s.loc(owner, ref)
	accs := s.acc[owner][s.alias[owner][ref.Buf]]
	lane, i := int32(st.Lane), st.Index
	for j := range ref.Len {
		a := &accs[off+j]
		if a.writer >= 0 && a.wrank != int32(actor) {
			return crossRank("writes", ref, j, "wrote", a.wrank, a.writer, a.wlane)
		}
		if a.rrank != noRank && a.rrank != int32(actor) {
			return crossRank("writes", ref, j, "read", a.rrank, -1, -1)
		}
		if !ordered(vc, a.wlane, a.writer) {
			return fmt.Errorf("writes %s[%d] while step %d on lane %d may still write it", ref.Buf, ref.Off+j, a.writer, a.wlane)
		}
		for l, rd := range a.readers {
			if int32(l) != lane && !ordered(vc, int32(l), rd) {
				return fmt.Errorf("writes %s[%d] while step %d on lane %d may still read it", ref.Buf, ref.Off+j, rd, l)
			}
		}
		arr[off+j] = vals[j]
		a.writer, a.wlane, a.wrank = int32(i), lane, int32(actor)
	}
	return nil
}

// crossRank reports an element that steps of two ranks touch, at least
// one writing it: only switch steps reach another rank's memory, and
// nothing orders them against that rank's own steps (see Check).
func crossRank(does string, ref Ref, j int, other string, rank, step, lane int32) error {
	who := fmt.Sprintf("rank %d", rank)
	switch {
	case rank == manyRanks:
		who = "several ranks"
	case step >= 0:
		who = fmt.Sprintf("rank %d's step %d on lane %d", rank, step, lane)
	}
	return fmt.Errorf("%s %s[%d], which %s %s: steps of different ranks may race on it (a switch step's elements on a member must be touched by no other rank's steps, unless all only read them)",
		does, ref.Buf, ref.Off+j, who, other)
}

// verify compares every output element with what the collective defines.
func (s *symRun) verify() error {
	p := s.p
	n := p.Count
	out := func(r, i int) sym {
		arr, off := s.loc(r, Ref{Buf: Out, Off: i, Len: 1})
		return arr[off]
	}
	// reduced checks that v reduces element idx(q) of every rank q once.
	reduced := func(r, i int, v sym, idx func(q int) int) error {
		want := make([]sym, p.Ranks)
		for q := range p.Ranks {
			want[q] = s.t.leaf(q, idx(q))
		}
		slices.Sort(want)
		node := s.t.nodes[v]
		if isAvg(p.Spec) {
			if node.kind != symDivide {
				return fmt.Errorf("rank %d out[%d] = %s is not divided for avg", r, i, s.t.describe(v))
			}
			v = sym(node.a)
		}
		if got := s.t.leavesOf(v); !slices.Equal(got, want) || s.hasDivide(v) {
			return fmt.Errorf("rank %d out[%d] = %s, want every rank's element once", r, i, s.t.describe(v))
		}
		return nil
	}
	copied := func(r, i int, v sym, q, j int) error {
		if want := s.t.leaf(q, j); v != want {
			return fmt.Errorf("rank %d out[%d] = %s, want %s", r, i, s.t.describe(v), s.t.describe(want))
		}
		return nil
	}
	var err error
	for r := 0; r < p.Ranks && err == nil; r++ {
		switch p.Op {
		case AllReduce:
			for i := 0; i < n && err == nil; i++ {
				err = reduced(r, i, out(r, i), func(int) int { return i })
				if err == nil && out(r, i) != out(0, i) {
					err = fmt.Errorf("ranks 0 and %d reduce out[%d] in different orders: %s vs %s", r, i, s.t.describe(out(0, i)), s.t.describe(out(r, i)))
				}
			}
		case Reduce:
			for i := 0; r == p.Root && i < n && err == nil; i++ {
				err = reduced(r, i, out(r, i), func(int) int { return i })
			}
		case ReduceScatter:
			for i := 0; i < n && err == nil; i++ {
				err = reduced(r, i, out(r, i), func(int) int { return r*n + i })
			}
		case AllGather:
			for i := 0; i < p.Ranks*n && err == nil; i++ {
				err = copied(r, i, out(r, i), i/n, i%n)
			}
		case Gather:
			for i := 0; r == p.Root && i < p.Ranks*n && err == nil; i++ {
				err = copied(r, i, out(r, i), i/n, i%n)
			}
		case Broadcast:
			for i := 0; i < n && err == nil; i++ {
				err = copied(r, i, out(r, i), p.Root, i)
			}
		case AllToAll:
			for i := 0; i < p.Ranks*n && err == nil; i++ {
				err = copied(r, i, out(r, i), i/n, r*n+i%n)
			}
		case SendRecv:
			for i := 0; i < n && err == nil; i++ {
				err = copied(r, i, out(r, i), mod(r-1, p.Ranks), i)
			}
		case Barrier:
			if j := slices.Index(s.heard[r], false); j >= 0 {
				err = fmt.Errorf("rank %d can leave the barrier without hearing from rank %d", r, j)
			}
		}
	}
	return err
}

func (s *symRun) hasDivide(v sym) bool {
	switch n := s.t.nodes[v]; n.kind {
	case symDivide:
		return true
	case symCombine:
		return s.hasDivide(sym(n.a)) || s.hasDivide(sym(n.b))
	}
	return false
}
