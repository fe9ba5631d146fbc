package main

import "regexp"

var (
	dirName  = regexp.MustCompile(`^kieker-\d{8}-\d{6}-\d+-UTC-[^/]*-[^/]+$`)
	fileName = regexp.MustCompile(`^kieker-\d{8}-\d{9}-UTC-\d{3,}\.(dat|bin)(\.(gz|df|zip|xz))?$`)
)

func regexpFind(s, re string) []string { return regexp.MustCompile(re).FindStringSubmatch(s) }
