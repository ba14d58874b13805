package checkpoint

// WithHook returns opts with a hook called after each step of Checkpoint.
func WithHook(opts Options, hook func(step int) error) Options {
	opts.hook = hook
	return opts
}
