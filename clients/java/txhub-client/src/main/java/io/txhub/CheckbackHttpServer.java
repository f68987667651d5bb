package io.txhub;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

/**
 * A check-back endpoint on the JDK's {@code com.sun.net.httpserver.HttpServer}, for producers
 * without a web framework. The resolver is called on the server's threads.
 */
public final class CheckbackHttpServer implements AutoCloseable {
	private final HttpServer server;
	private final ExecutorService threads;

	/**
	 * Starts serving at once.
	 *
	 * @param address where to listen (port 0 picks a free one: see {@link #port()})
	 * @param path the check-back path, e.g. {@code /txhub/check}; other paths are answered 404
	 * @param checkback the handler
	 * @throws IOException when the address cannot be bound
	 */
	public CheckbackHttpServer(InetSocketAddress address, String path, Checkback checkback) throws IOException {
		// a hub asks about many messages at once (checkback.per_host connections per replica)
		server = HttpServer.create(address, 64);
		threads = Executors.newFixedThreadPool(8, r -> {
			Thread t = new Thread(r, "txhub-checkback");
			t.setDaemon(true);
			return t;
		});
		server.setExecutor(threads);
		server.createContext("/", ex -> serve(ex, path, checkback));
		server.start();
	}

	private static void serve(HttpExchange ex, String path, Checkback checkback) throws IOException {
		try (ex) {
			Checkback.Response r;
			if (!ex.getRequestURI().getRawPath().equals(path))
				r = new Checkback.Response(404, "{\"error\":\"not a check-back path\"}".getBytes(java.nio.charset.StandardCharsets.US_ASCII));
			else if (!ex.getRequestMethod().equals("GET"))
				r = new Checkback.Response(405, "{\"error\":\"a check-back is a GET\"}".getBytes(java.nio.charset.StandardCharsets.US_ASCII));
			else
				r = checkback.handle(ex.getRequestURI().getRawQuery(), ex.getRequestHeaders()::getFirst);
			ex.getResponseHeaders().set("Content-Type", "application/json");
			ex.sendResponseHeaders(r.status(), r.body().length);
			try (OutputStream out = ex.getResponseBody()) {
				out.write(r.body());
			}
		}
	}

	/** @return the port it listens on */
	public int port() {
		return server.getAddress().getPort();
	}

	/** Stops serving (requests under way get a second to finish). */
	@Override
	public void close() {
		server.stop(1);
		threads.shutdownNow();
	}
}
