package hw_test

// A test from a mutation run over World.Dup: the id counter is taken
// atomically.

import (
	"sync"
	"testing"

	"github.com/commsim/commsim/hw"
)

// TestDupsFromManyGoroutinesHaveIDsOfTheirOwn: duplicates made at once,
// as communicators and gradient servers started from goroutines make
// them, each get an id of their own (and so tags of their own): the ids
// are 1 to n, each once. A counter read and then written could hand one
// id to two.
func TestDupsFromManyGoroutinesHaveIDsOfTheirOwn(t *testing.T) {
	const goroutines, each = 8, 2000
	w, err := hw.NewWorld(devices(2))
	if err != nil {
		t.Fatal(err)
	}
	ids := make([][]uint32, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for range each {
				dup, err := w.Dup()
				if err != nil {
					t.Error(err)
					return
				}
				ids[g] = append(ids[g], dup.ID())
			}
		})
	}
	wg.Wait()
	seen := make([]bool, goroutines*each+1)
	for _, list := range ids {
		for _, id := range list {
			if id == 0 || int(id) >= len(seen) || seen[id] {
				t.Fatalf("id %d handed out twice, or out of 1..%d", id, goroutines*each)
			}
			seen[id] = true
		}
	}
}
