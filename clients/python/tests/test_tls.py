"""https: the client against a real server with native TLS (tls_cert and tls_key), its certificate
made here by the openssl CLI for 127.0.0.1 and signed by itself (a private CA for the client)."""

from __future__ import annotations

import ssl
import subprocess
import unittest

from support import ADMIN_KEY, Processes, Server, fast_client
from tollgate_client import InvalidArgumentError, NotFoundError, TransportError


class TlsTest(unittest.TestCase):
    processes: Processes
    server: Server
    cert: str

    @classmethod
    def setUpClass(cls) -> None:
        cls.processes = Processes()
        try:
            folder = cls.processes.folder
            cls.cert, key = str(folder / "cert.pem"), str(folder / "key.pem")
            subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                            "-nodes", "-keyout", key, "-out", cls.cert, "-days", "2", "-subj", "/CN=localhost",
                            "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
                           check=True, capture_output=True)
            cls.server = Server(cls.processes, f'tls_cert = "{cls.cert}"\ntls_key = "{key}"\n')
        except BaseException:
            cls.processes.close()
            raise

    @classmethod
    def tearDownClass(cls) -> None:
        cls.processes.close()

    def https_url(self) -> str:
        return f"https://127.0.0.1:{self.server.port}"

    def test_a_hold_over_https_with_a_private_ca(self) -> None:
        with fast_client(self.https_url(), tls_context=ssl.create_default_context(cafile=self.cert)) as c:
            c.create_account("tls-1")
            c.credit("tls-1", 5, "tls-seed")
            hold = c.reserve("tls-1", 2, request_id="tls-r1")
            c.commit(hold.hold_id, 1)
            account = c.get_account("tls-1")
            self.assertEqual((account.available, account.reserved, account.used), (4, 0, 1))

    def test_an_unknown_certificate_is_refused_at_once_and_nothing_is_sent(self) -> None:
        with fast_client(self.https_url()) as c:  # the system's CAs: this certificate is not among them
            with self.assertRaises(TransportError) as caught:
                c.create_account("tls-never")
            self.assertEqual(caught.exception.code, "tls")
            self.assertIn("certificate", str(caught.exception))
            self.assertEqual(caught.exception.attempts, 1, "a refused certificate is not tried again")
        with fast_client(self.https_url(), tls_context=ssl.create_default_context(cafile=self.cert)) as c:
            with self.assertRaises(NotFoundError):
                c.get_account("tls-never")

    def test_plain_http_to_a_tls_server_and_https_to_a_plain_one_fail_clearly(self) -> None:
        with fast_client(f"http://127.0.0.1:{self.server.port}") as c:
            with self.assertRaises(TransportError):
                c.get_account("tls-1")
        others = Processes()  # its own folder: one server per SQLite file
        try:
            plain = Server(others)
            with fast_client(f"https://127.0.0.1:{plain.port}") as c:
                with self.assertRaises(TransportError) as caught:
                    c.get_account("x")
                self.assertEqual(caught.exception.code, "tls")
        finally:
            others.close()

    def test_a_tls_context_for_an_http_url_is_refused(self) -> None:
        with self.assertRaises(InvalidArgumentError) as caught:
            fast_client("http://127.0.0.1:1", ADMIN_KEY, tls_context=ssl.create_default_context())
        self.assertEqual(caught.exception.argument, "tls_context")


if __name__ == "__main__":
    unittest.main()
