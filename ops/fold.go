package ops

// Folding a plan's duplicate channels. NCCL doubles its channels when a
// channel would be fast (search.cc's duplication): channels c and c+C/2
// then take the same path, peer for peer and byte for byte. Every link
// either carries both or neither, so on a fabric whose every capacity is
// halved, channel c alone takes the time the two take together: a
// simulator may run half the lanes (see simexec's Driver.TimeRun).

// FoldChannels returns the plan's first channels alone and how many of
// its channels each stands for (k), when k > 1 and its channels c,
// c+C/k, c+2C/k, … are duplicates. Lanes belong to channels in order
// (lane l to channel l/L, L = ⌈Lanes/C⌉ lanes each). Duplicates have, on
// every rank, lane for lane, the same steps: kind, peer, bytes, and
// waits on the same steps of the lanes that correspond. The folded plan
// keeps the lanes of the first C/k channels; no kept step waits on a
// dropped one, and every message a kept lane sends a kept lane receives.
// ok is false for a streamed or native plan, or one with no duplicates.
func (p *Plan) FoldChannels() (folded *Plan, k int, ok bool) {
	folded, k = p, 1
	for {
		half, ok := folded.foldHalf()
		if !ok {
			break
		}
		folded, k = half, 2*k
	}
	return folded, k, k > 1
}

// foldHalf folds channels c and c+C/2 into c once.
func (p *Plan) foldHalf() (*Plan, bool) {
	c := p.Channels
	if p.Steps == nil || p.native || c < 2 || c%2 != 0 || p.Lanes < 2 {
		return nil, false
	}
	per := (p.Lanes + c - 1) / c // lanes per channel
	shift := per * c / 2         // lane l's duplicate is lane l+shift
	if shift >= p.Lanes {
		return nil, false
	}
	half := *p
	half.Spec.Channels, half.Lanes = c/2, shift
	half.Steps = make([][]Step, len(p.Steps))
	sends := map[foldMessage]int{}
	for r, steps := range p.Steps {
		kept, ok := foldRank(steps, shift, r, sends)
		if !ok {
			return nil, false
		}
		half.Steps[r] = kept
	}
	for _, n := range sends {
		if n != 0 {
			return nil, false
		}
	}
	return &half, true
}

// foldMessage is one direction and tag of a plan's messages.
type foldMessage struct {
	from, to int
	tag      uint32
}

// foldRank checks one rank's lanes below shift against their duplicates
// and returns its kept steps, their waits renumbered; it counts the kept
// messages into sends (+1 a send, −1 a receive).
func foldRank(steps []Step, shift, r int, sends map[foldMessage]int) ([]Step, bool) {
	// pos[i] is step i's place in its lane; lanes[l] lists lane l's steps.
	pos := make([]int, len(steps))
	var lanes [][]int
	for i, s := range steps {
		if s.Lane < 0 || s.Lane >= 2*shift {
			return nil, false // lanes past the duplicates
		}
		for len(lanes) <= s.Lane {
			lanes = append(lanes, nil)
		}
		pos[i] = len(lanes[s.Lane])
		lanes[s.Lane] = append(lanes[s.Lane], i)
	}
	for len(lanes) < 2*shift {
		lanes = append(lanes, nil)
	}
	for l := range shift {
		a, b := lanes[l], lanes[l+shift]
		if len(a) != len(b) {
			return nil, false
		}
		for j, i := range a {
			s, d := steps[i], steps[b[j]]
			if s.Kind != d.Kind || s.Peer != d.Peer || s.Src.Len != d.Src.Len || s.Dst.Len != d.Dst.Len || len(s.After) != len(d.After) {
				return nil, false
			}
			for w, x := range s.After {
				y := d.After[w]
				if x < 0 || x >= i || y < 0 || y >= b[j] { // not an earlier step: a malformed plan
					return nil, false
				}
				if steps[x].Lane >= shift || steps[y].Lane != steps[x].Lane+shift || pos[y] != pos[x] {
					return nil, false
				}
			}
		}
	}
	index := make([]int, len(steps))
	kept := make([]Step, 0, len(steps)/2)
	for i, s := range steps {
		if s.Lane >= shift {
			continue
		}
		index[i] = len(kept)
		if len(s.After) > 0 {
			after := make([]int, len(s.After))
			for w, x := range s.After {
				after[w] = index[x]
			}
			s.After = after
		}
		switch s.Kind {
		case StepSend:
			sends[foldMessage{r, s.Peer, s.Tag}]++
		case StepRecv:
			sends[foldMessage{s.Peer, r, s.Tag}]--
		}
		kept = append(kept, s)
	}
	return kept, true
}
