package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/tracebridge/tracebridge/internal/api"
	"github.com/tracebridge/tracebridge/internal/hostauth"
)

const tokenSynopsis = `token [--hash]

Prints a new API token on the first line and its argon2id hash on the
second. The hash goes into the configuration (http: {api_tokens_file:
FILE}, one hash per line, or api_tokens: [HASH]); the token goes to whoever
may write over the HTTP API (Authorization: Bearer TOKEN; query --url reads
TRACEBRIDGE_TOKEN). The token itself is stored nowhere.

--hash reads a token from the first line of standard input and prints its
hash only.`

func cmdToken(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("token", tokenSynopsis, stderr)
	hashOnly := fs.Bool("hash", false, "hash the token read from standard input")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("token: no arguments (a token to hash goes to standard input with --hash)")
	}
	if *hashOnly {
		line, err := bufio.NewReader(os.Stdin).ReadString('\n')
		if err != nil && err != io.EOF {
			return err
		}
		tok := strings.TrimRight(line, "\r\n")
		if tok == "" {
			return usagef("token --hash: the first line of standard input is empty")
		}
		fmt.Fprintln(stdout, hostauth.HashSecret(tok))
		return nil
	}
	tok, hash := api.NewToken()
	fmt.Fprintln(stdout, tok)
	fmt.Fprintln(stdout, hash)
	return nil
}
