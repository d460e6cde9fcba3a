// Package proptest will hold gopter generators, properties and the
// backend-equivalence harness for collectives. Nothing is implemented here
// yet.
package proptest
