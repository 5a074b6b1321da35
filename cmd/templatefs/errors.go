package main

import "errors"

// errUnrepaired is fsck's failure: problems were found and not all of them
// were repaired. The problem lines are on stdout already.
var errUnrepaired = errors.New("the store has problems")
