package airlock

// SetAPILevelForTest makes Dial claim level instead of APILevel until restore is called, so that
// the tests see how a daemon of another level is refused. It exists only in this package's tests.
func SetAPILevelForTest(level uint32) (restore func()) {
	before := apiLevel
	apiLevel = level
	return func() { apiLevel = before }
}
