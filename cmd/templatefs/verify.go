package main

import (
	"errors"
	"flag"
	"fmt"

	"templatefs/store"
)

// errMismatch is verify's failure: an artifact does not match its
// record. The problem lines are on stdout already.
var errMismatch = errors.New("the store's payloads are damaged")

// prepareVerify parses verify's command line. Its operation re-hashes
// every artifact of every generation, or of the generations named
// (store.Verify, reporting the bytes hashed), and prints one line per problem (store.Problem.String). Exit
// status: 0 when every artifact matches its record, 1 when any does not
// or the store cannot be read.
func prepareVerify(fl *flag.FlagSet, args []string) (storeOp, error) {
	pos, err := parseFlags(fl, args)
	if err != nil {
		return storeOp{}, err
	}
	dir := pos[0]
	var gens []store.GenerationID
	for _, arg := range pos[1:] {
		id, err := store.ParseGenerationID(arg)
		if err != nil {
			return storeOp{}, usagef("GEN %q is not a generation ID (such as g000001)", arg)
		}
		gens = append(gens, id)
	}
	run := func(st *store.Store, out opOutput) error {
		problems, err := st.Verify(gens, out.progress("hash"))
		for _, p := range problems {
			fmt.Fprintln(out.stdout, p)
		}
		if err != nil {
			return err
		}
		if len(problems) > 0 {
			return fmt.Errorf("%s: %d %s not as recorded: %w", dir, len(problems), plural(len(problems), "artifact"), errMismatch)
		}
		return nil
	}
	return storeOp{dir: dir, open: store.Options{NoRecover: true}, args: commandLine(fl, pos...), run: run}, nil
}
