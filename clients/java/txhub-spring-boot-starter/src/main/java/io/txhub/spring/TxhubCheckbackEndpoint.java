package io.txhub.spring;

import io.txhub.Checkback;
import io.txhub.CheckbackServlet;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import org.springframework.stereotype.Controller;
import org.springframework.web.bind.annotation.GetMapping;

/**
 * Answers the hub's check-back at {@code txhub.checkback.path} (default {@code /txhub/check}):
 * verifies the signature and the timestamp, then asks the {@link TxhubCheckbackResolver}.
 */
@Controller
public class TxhubCheckbackEndpoint {
	private final Checkback checkback;

	/** @param checkback the handler */
	public TxhubCheckbackEndpoint(Checkback checkback) {
		this.checkback = checkback;
	}

	/**
	 * @param req the request @param resp the response
	 * @throws IOException on a write error
	 */
	@GetMapping("${txhub.checkback.path:/txhub/check}")
	public void check(HttpServletRequest req, HttpServletResponse resp) throws IOException {
		CheckbackServlet.write(checkback.handle(req.getQueryString(), req::getHeader), resp);
	}
}
