package castle;

/** Lines for the test that reads stdout: one event a line, flushed at once (a kill -9 may follow). */
final class Out {
    private Out() {
    }

    static synchronized void line(String text) {
        System.out.println(text);
        System.out.flush();
    }
}
