/* lsan_runner.c: linked into every Criterion test program.
 *
 * Criterion 2.4.1 (Debian's) bundles BoxFort, whose timeout killer loses a
 * 48-byte request now and then when the timeouts of two tests overlap. That
 * happens in the runner, the parent process that spawns one worker per test
 * and runs none of our code; LeakSanitizer then fails the whole program at
 * exit. Leaks allocated by libcriterion are suppressed in the runner only:
 * the workers, where the tests and the code under test run, are recognised by
 * BoxFort's BXFI_MAP variable and keep every leak reported. (A suppression
 * for the module everywhere would hide the tests' own leaks too, since
 * LeakSanitizer matches a suppression against every frame of a stack.) */
#include <stdlib.h>

const char *__lsan_default_suppressions(void);

const char *__lsan_default_suppressions(void)
{
	return getenv("BXFI_MAP") ? "" : "leak:libcriterion.so\n";
}
