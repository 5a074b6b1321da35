package main

// superviseUnderSystemd is false on Windows: there is no systemd.
func superviseUnderSystemd() bool { return false }

// supervise is never called on Windows.
func supervise() error { return nil }
