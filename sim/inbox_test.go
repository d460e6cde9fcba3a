package sim

import (
	"math/rand/v2"
	"testing"
)

// TestInboxMatchesMap drives the inbox and a Go map with the same random
// puts and removes, over few senders and tags so that probe runs collide,
// wrap around the table and are shifted back by removes.
func TestInboxMatchesMap(t *testing.T) {
	devs := make([]*Device, 5)
	for i := range devs {
		devs[i] = &Device{rank: i}
	}
	type key struct {
		from *Device
		tag  uint64
	}
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 1))
		var in inbox
		want := map[key]*mailbox{}
		for range 5000 {
			k := key{devs[rng.IntN(len(devs))], uint64(rng.IntN(40))}
			switch got := in.get(k.from, k.tag); {
			case got != want[k]:
				t.Fatalf("seed %d: get(%d, %d) = %p, want %p", seed, k.from.rank, k.tag, got, want[k])
			case got == nil && rng.IntN(3) > 0:
				mb := &mailbox{}
				in.put(k.from, k.tag, mb)
				want[k] = mb
			case got != nil && rng.IntN(2) == 0:
				in.remove(k.from, k.tag)
				delete(want, k)
			}
			if in.used != len(want) {
				t.Fatalf("seed %d: %d entries, want %d", seed, in.used, len(want))
			}
		}
		for k, mb := range want {
			if got := in.get(k.from, k.tag); got != mb {
				t.Fatalf("seed %d: at the end get(%d, %d) = %p, want %p", seed, k.from.rank, k.tag, got, mb)
			}
		}
	}
}
