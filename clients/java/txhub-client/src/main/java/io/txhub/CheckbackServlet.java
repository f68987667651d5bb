package io.txhub;

import jakarta.servlet.http.HttpServlet;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;

/**
 * A check-back endpoint as a Jakarta servlet (Servlet 6): map it to the check-back path. Needs
 * {@code jakarta.servlet-api} (an optional dependency of this library; every servlet container
 * has it).
 */
public class CheckbackServlet extends HttpServlet {
	private static final long serialVersionUID = 1L;

	private final transient Checkback checkback;

	/** @param checkback the handler */
	public CheckbackServlet(Checkback checkback) {
		this.checkback = checkback;
	}

	@Override
	protected void doGet(HttpServletRequest req, HttpServletResponse resp) throws IOException {
		write(checkback.handle(req.getQueryString(), req::getHeader), resp);
	}

	/**
	 * Writes a response (for frameworks that hand over the servlet objects themselves).
	 *
	 * @param r the response @param resp the servlet response @throws IOException on a write error
	 */
	public static void write(Checkback.Response r, HttpServletResponse resp) throws IOException {
		resp.setStatus(r.status());
		resp.setContentType("application/json");
		resp.setContentLength(r.body().length);
		resp.getOutputStream().write(r.body());
	}
}
