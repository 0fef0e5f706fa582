import os, subprocess, sys, time, socket, statistics
def free():
    s=socket.socket(); s.bind(("127.0.0.1",0)); p=s.getsockname()[1]; s.close(); return p
def stat(pid):
    f=open(f"/proc/{pid}/stat").read().rsplit(")",1)[1].split()
    return int(f[11]), int(f[12])
tick=os.sysconf("SC_CLK_TCK")
bench="/work/main/.build/release/chainwatch-bench"
res={}
for rep in range(3):
    for name,binary in [("before","/tmp/before/.build/release/chainwatch"),("after","/work/main/.build/release/chainwatch")]:
        port=free()
        p=subprocess.Popen([binary,"run","--listen",f"127.0.0.1:{port}","--admin","off","--alert-log","/tmp/st/cw.jsonl"],stdout=subprocess.DEVNULL,stderr=subprocess.DEVNULL)
        time.sleep(2)
        for tls in ["1.2","1.3"]:
            u0,s0=stat(p.pid); n=2000
            r=subprocess.run([bench,"handshake","--tls",tls,"--fresh-certificates","--count",str(n),"-c","8","--proxy",f"127.0.0.1:{port}","-q"],capture_output=True,text=True)
            time.sleep(0.3); u1,s1=stat(p.pid)
            res.setdefault((name,tls),[]).append(((u1-u0)/tick/n*1000,(s1-s0)/tick/n*1000, r.returncode))
        p.terminate(); p.wait()
        os.remove("/tmp/st/cw.jsonl")
for k in sorted(res):
    v=res[k]
    print(k, "user", round(statistics.median(x[0] for x in v),3), "sys", round(statistics.median(x[1] for x in v),3), "total", round(statistics.median(x[0]+x[1] for x in v),3), "ms/conn", [x[2] for x in v])
