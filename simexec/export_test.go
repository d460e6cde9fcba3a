package simexec

// Orbits is orbits, for tests.
var Orbits = orbits
