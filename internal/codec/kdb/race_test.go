//go:build race

package kdb

const raceEnabled = true
