//go:build race

package main

// raceEnabled says the race detector is on: its shadow memory makes heap
// measures meaningless, and the normal run makes them.
const raceEnabled = true
