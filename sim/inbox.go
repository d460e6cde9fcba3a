package sim

// inbox holds a device's live mailboxes by sender and tag. It is an
// open-addressing hash table with linear probing: every receive looks one
// up and plans use a fresh tag per step, so a Go map (hashing a 16-byte
// key, and deleting and re-inserting once per message) cost about a tenth
// of a large ring all-reduce. The table is never iterated, so its order
// cannot leak into results.
type inbox struct {
	slots []inboxSlot // empty, or a power of two long
	used  int
}

type inboxSlot struct {
	from *Device
	tag  uint64
	mb   *mailbox // nil marks an empty slot
}

func (in *inbox) home(from *Device, tag uint64) int {
	return int(mix64(tag^uint64(from.rank)<<44) & uint64(len(in.slots)-1))
}

// find returns the slot holding (from, tag), or the empty slot where it
// would go, or -1 when the table has no slots.
func (in *inbox) find(from *Device, tag uint64) int {
	if len(in.slots) == 0 {
		return -1
	}
	mask := len(in.slots) - 1
	for i := in.home(from, tag); ; i = (i + 1) & mask {
		s := &in.slots[i]
		if s.mb == nil || s.from == from && s.tag == tag {
			return i
		}
	}
}

func (in *inbox) get(from *Device, tag uint64) *mailbox {
	if i := in.find(from, tag); i >= 0 {
		return in.slots[i].mb
	}
	return nil
}

// put adds mb under (from, tag), which must not be present.
func (in *inbox) put(from *Device, tag uint64, mb *mailbox) {
	if 2*(in.used+1) > len(in.slots) {
		in.grow()
	}
	i := in.find(from, tag)
	in.slots[i] = inboxSlot{from: from, tag: tag, mb: mb}
	in.used++
}

func (in *inbox) grow() {
	old := in.slots
	in.slots = make([]inboxSlot, max(8, 2*len(old)))
	for _, s := range old {
		if s.mb != nil {
			in.slots[in.find(s.from, s.tag)] = s
		}
	}
}

// remove deletes (from, tag) if present, shifting later entries of its
// probe run back so that no tombstones are needed.
func (in *inbox) remove(from *Device, tag uint64) {
	i := in.find(from, tag)
	if i < 0 || in.slots[i].mb == nil {
		return
	}
	mask := len(in.slots) - 1
	in.slots[i] = inboxSlot{}
	in.used--
	for j := (i + 1) & mask; in.slots[j].mb != nil; j = (j + 1) & mask {
		s := in.slots[j]
		h := in.home(s.from, s.tag)
		// s may move to the hole at i unless its home lies cyclically in
		// (i, j]: then the hole is before where s may live.
		if (j-h)&mask >= (j-i)&mask {
			in.slots[i], in.slots[j] = s, inboxSlot{}
			i = j
		}
	}
}
