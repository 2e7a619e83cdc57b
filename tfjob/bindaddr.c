/* bind() to one address instead of every one: an LD_PRELOAD shim for TF tasks (tfjob/bindshim.py).
 *
 * TensorFlow's gRPC server listens on "0.0.0.0:PORT" whatever address its cluster spec names, and
 * serves anyone who connects. Once psnet_set_bind_address(ADDR) has been called (psjob does, with
 * its own address from the cluster spec, before it starts the server), a bind to the wildcard
 * address of ADDR's family becomes a bind to ADDR, and a bind to the other family's wildcard fails
 * with EADDRNOTAVAIL: gRPC tries [::] first, gets that error and falls back to 0.0.0.0, which is
 * rewritten. Binds to a named address, and every bind before the call, are left alone.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

static int family;  /* 0 until an address is set: bind() passes through */
static struct in_addr addr4;
static struct in6_addr addr6;

/* what tfjob/bindshim.py looks up to know the shim is loaded */
int psnet_bind_shim_version = 1;

int psnet_set_bind_address(const char *text) {
    if (inet_pton(AF_INET, text, &addr4) == 1) {
        family = AF_INET;
        return 0;
    }
    if (inet_pton(AF_INET6, text, &addr6) == 1) {
        family = AF_INET6;
        return 0;
    }
    return -1;
}

int bind(int fd, const struct sockaddr *sa, socklen_t len) {
    static int (*real_bind)(int, const struct sockaddr *, socklen_t);
    if (!real_bind)
        real_bind = (int (*)(int, const struct sockaddr *, socklen_t))dlsym(RTLD_NEXT, "bind");
    if (family && sa && sa->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
        struct sockaddr_in in;
        memcpy(&in, sa, sizeof in);
        if (in.sin_addr.s_addr == htonl(INADDR_ANY)) {
            if (family != AF_INET) {
                errno = EADDRNOTAVAIL;
                return -1;
            }
            in.sin_addr = addr4;
            return real_bind(fd, (const struct sockaddr *)&in, sizeof in);
        }
    }
    if (family && sa && sa->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
        struct sockaddr_in6 in6;
        memcpy(&in6, sa, sizeof in6);
        if (IN6_IS_ADDR_UNSPECIFIED(&in6.sin6_addr)) {
            if (family != AF_INET6) {
                errno = EADDRNOTAVAIL;
                return -1;
            }
            in6.sin6_addr = addr6;
            return real_bind(fd, (const struct sockaddr *)&in6, sizeof in6);
        }
    }
    return real_bind(fd, sa, len);
}
