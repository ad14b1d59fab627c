package bounds

// Numbers is numbers, for the tests of package bounds_test.
var Numbers = numbers
